"""`coder mcp-serve` checked by the official Python MCP client (PyPI `mcp` 2.x).

Over stdio and over streamable HTTP, in the client's default era (`auto`: `server/discover`,
2026-07-28) and in the legacy one (`initialize`, 2025-11-25): initialize, tools/list, a read,
a write, a path outside the root (an `isError` result) and a command without --yes (an
`isError` result saying to restart with --yes). Over HTTP the client sends the server's bearer
token (given in HALO_MCP_TOKEN); a request without it is answered 401 with a Bearer challenge.

Run by `cargo xtask interop` with HALO_CODER_BIN set to a `coder` binary; exits non-zero on
the first failure.
"""

import asyncio
import os
import secrets
import subprocess
import sys
import tempfile
from pathlib import Path

import httpx2
from mcp import Client, StdioServerParameters
from mcp.client.streamable_http import streamable_http_client

CODER = os.environ["HALO_CODER_BIN"]
TOOLS = ["bash", "edit", "glob", "grep", "ls", "read", "write"]


def text(result) -> str:
    return "\n".join(block.text for block in result.content if getattr(block, "type", "") == "text")


async def check(client: Client, project: Path, label: str) -> None:
    expected_era = "2025-11-25" if "legacy" in label else "2026-07-28"
    assert client.protocol_version == expected_era, (label, client.protocol_version)

    listed = await client.list_tools()
    names = [t.name for t in listed.tools]
    assert names == TOOLS, (label, names)
    read_tool = next(t for t in listed.tools if t.name == "read")
    assert read_tool.annotations is not None and read_tool.annotations.read_only_hint is True, read_tool
    assert read_tool.input_schema["type"] == "object", read_tool.input_schema

    result = await client.call_tool("read", {"path": "hello.txt"})
    assert not result.is_error, (label, text(result))
    assert "hello from the project" in text(result), (label, text(result))

    name = f"written-{label}.txt"
    result = await client.call_tool("write", {"path": name, "content": f"written by python ({label})\n"})
    assert not result.is_error, (label, text(result))
    assert (project / name).read_text() == f"written by python ({label})\n"

    result = await client.call_tool("read", {"path": "../outside.txt"})
    assert result.is_error, (label, text(result))
    assert "outside the sandbox root" in text(result), (label, text(result))

    result = await client.call_tool("bash", {"command": "touch made-by-bash"})
    assert result.is_error, (label, text(result))
    assert "--yes" in text(result), (label, text(result))
    assert not (project / "made-by-bash").exists()
    print(f"ok: {label} ({client.protocol_version})", flush=True)


async def over_stdio(project: Path, mode: str) -> None:
    params = StdioServerParameters(command=CODER, args=["mcp-serve", "--dir", str(project)])
    async with Client(params, mode=mode, read_timeout_seconds=30) as client:
        await check(client, project, f"stdio-{mode}")


async def over_http(project: Path, mode: str) -> None:
    token = secrets.token_hex(32)
    server = subprocess.Popen(
        [CODER, "mcp-serve", "--dir", str(project), "--http", "127.0.0.1:0"],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
        env={**os.environ, "HALO_MCP_TOKEN": token},
    )
    try:
        url = None
        for line in server.stderr:
            if line.startswith("serving MCP at "):
                url = line.removeprefix("serving MCP at ").strip()
                break
        assert url and url.startswith("http://127.0.0.1:"), url
        initialize = {
            "jsonrpc": "2.0",
            "id": 1,
            "method": "initialize",
            "params": {
                "protocolVersion": "2025-11-25",
                "capabilities": {},
                "clientInfo": {"name": "python", "version": "1"},
            },
        }
        accept = {"Accept": "application/json, text/event-stream"}
        async with httpx2.AsyncClient() as plain:
            refused = await plain.post(url, json=initialize, headers=accept)
        assert refused.status_code == 401, (refused.status_code, refused.text)
        assert refused.headers["www-authenticate"].startswith("Bearer"), refused.headers
        http = httpx2.AsyncClient(
            headers={"Authorization": f"Bearer {token}"},
            timeout=httpx2.Timeout(30, read=300),
        )
        async with http:
            transport = streamable_http_client(url, http_client=http)
            async with Client(transport, mode=mode, read_timeout_seconds=30) as client:
                await check(client, project, f"http-{mode}")
    finally:
        server.kill()
        server.wait()


async def main() -> None:
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        project = root / "project"
        project.mkdir()
        (project / "hello.txt").write_text("hello from the project\n")
        (root / "outside.txt").write_text("outside\n")
        for mode in ("auto", "legacy"):
            await asyncio.wait_for(over_stdio(project, mode), 60)
            await asyncio.wait_for(over_http(project, mode), 60)
    print("python mcp client: all checks passed", flush=True)


if __name__ == "__main__":
    try:
        asyncio.run(main())
    except AssertionError as e:
        print(f"FAILED: {e!r}", file=sys.stderr)
        sys.exit(1)
