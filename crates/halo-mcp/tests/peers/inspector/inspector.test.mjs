// `coder mcp-serve` checked by the MCP Inspector's CLI (npm @modelcontextprotocol/inspector),
// in its legacy era (initialize, 2025-11-25) and its modern one (server/discover,
// 2026-07-28), over stdio and over streamable HTTP: tools/list, a read, and a path outside
// the root, which the CLI reports as an isError result (exit code 5). Over HTTP the CLI sends
// the server's bearer token (given in HALO_MCP_TOKEN) with --header.
//
// Run by `cargo xtask interop` with HALO_CODER_BIN set to a `coder` binary.

import { test, before, after } from "node:test";
import assert from "node:assert/strict";
import { spawn, spawnSync } from "node:child_process";
import { randomBytes } from "node:crypto";
import { mkdtempSync, mkdirSync, writeFileSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join, dirname } from "node:path";
import { fileURLToPath } from "node:url";

const coder = process.env.HALO_CODER_BIN;
assert.ok(coder, "HALO_CODER_BIN names the coder binary");
const here = dirname(fileURLToPath(import.meta.url));
const inspector = join(here, "node_modules/.bin/mcp-inspector");
const TOOLS = ["bash", "edit", "glob", "grep", "ls", "read", "write"];

const token = randomBytes(32).toString("hex");
let root, project, http, url;

before(async () => {
  root = mkdtempSync(join(tmpdir(), "halo-inspector-"));
  project = join(root, "project");
  mkdirSync(project);
  writeFileSync(join(project, "hello.txt"), "hello from the project\n");
  writeFileSync(join(root, "outside.txt"), "outside\n");
  http = spawn(coder, ["mcp-serve", "--dir", project, "--http", "127.0.0.1:0"], {
    stdio: ["ignore", "ignore", "pipe"],
    env: { ...process.env, HALO_MCP_TOKEN: token },
  });
  url = await new Promise((resolve, reject) => {
    let seen = "";
    http.stderr.on("data", (chunk) => {
      seen += chunk;
      const m = seen.match(/serving MCP at (\S+)/);
      if (m) resolve(m[1]);
    });
    http.on("exit", (code) => reject(new Error(`coder mcp-serve --http exited (${code}): ${seen}`)));
  });
});

after(() => {
  http?.kill();
  rmSync(root, { recursive: true, force: true });
});

/** Runs the inspector CLI on `target` (argv of a stdio server, or the URL) with `args`. */
function inspect(target, era, args) {
  const out = spawnSync(
    inspector,
    ["--cli", ...target, "--protocol-era", era, "-q", "--format", "json", ...args],
    { encoding: "utf8", timeout: 60_000 },
  );
  const line = (out.stdout.trim() || out.stderr.trim()).split("\n").at(-1) ?? "";
  let json;
  try {
    json = JSON.parse(line);
  } catch {
    assert.fail(`not JSON (exit ${out.status}): ${out.stdout}\n${out.stderr}`);
  }
  return { status: out.status, json };
}

for (const transport of ["stdio", "http"]) {
  for (const era of ["legacy", "modern"]) {
    test(`${transport}, ${era} era: list, read, and a path outside the root`, () => {
      const target =
        transport === "stdio"
          ? [coder, "mcp-serve", "--dir", project]
          : [url, "--header", `Authorization: Bearer ${token}`];
      const listed = inspect(target, era, ["--method", "tools/list"]);
      assert.equal(listed.status, 0, JSON.stringify(listed.json));
      assert.deepEqual(listed.json.result.tools.map((t) => t.name), TOOLS);
      const read = listed.json.result.tools.find((t) => t.name === "read");
      assert.equal(read.annotations.readOnlyHint, true);

      const ok = inspect(target, era, ["--method", "tools/call", "--tool-name", "read", "--tool-arg", "path=hello.txt"]);
      assert.equal(ok.status, 0, JSON.stringify(ok.json));
      assert.equal(ok.json.result.isError, false);
      assert.match(ok.json.result.content[0].text, /hello from the project/);

      const outside = spawnSync(
        inspector,
        ["--cli", ...target, "--protocol-era", era, "-q", "--format", "json",
          "--method", "tools/call", "--tool-name", "read", "--tool-arg", "path=../outside.txt"],
        { encoding: "utf8", timeout: 60_000 },
      );
      assert.equal(outside.status, 5, `${outside.stdout}\n${outside.stderr}`);
      const result = JSON.parse(outside.stdout.trim().split("\n")[0]).result;
      assert.equal(result.isError, true);
      assert.match(result.content[0].text, /outside the sandbox root/);
    });
  }
}

test("http without the bearer token: 401 with a Bearer challenge, and the CLI fails", async () => {
  const response = await fetch(url, {
    method: "POST",
    headers: { "Content-Type": "application/json", Accept: "application/json, text/event-stream" },
    body: JSON.stringify({
      jsonrpc: "2.0",
      id: 1,
      method: "initialize",
      params: { protocolVersion: "2025-11-25", capabilities: {}, clientInfo: { name: "node", version: "1" } },
    }),
  });
  assert.equal(response.status, 401);
  assert.match(response.headers.get("www-authenticate"), /^Bearer/);
  const out = spawnSync(inspector, ["--cli", url, "--protocol-era", "legacy", "-q", "--format", "json", "--method", "tools/list"], {
    encoding: "utf8",
    timeout: 60_000,
  });
  assert.notEqual(out.status, 0, `${out.stdout}\n${out.stderr}`);
});
