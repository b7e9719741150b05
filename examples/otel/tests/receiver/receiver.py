"""A real OTLP/HTTP trace receiver for `cargo xtask interop`.

Listens on 127.0.0.1 at a free port, prints `listening on http://127.0.0.1:PORT` as its
first line, and decodes every `POST /v1/traces` body (protobuf, optionally gzip) as an
`ExportTraceServiceRequest` with the OpenTelemetry project's own generated classes (PyPI
`opentelemetry-proto`), as a collector does. Each span goes to the `--out` file as one JSON
line, its attribute values with the type they arrived as:

    {"trace_id": hex, "span_id": hex, "parent_span_id": hex or "", "name": str,
     "kind": "SPAN_KIND_CLIENT", "status": "STATUS_CODE_UNSET", "scope": str,
     "resource": {key: value}, "attributes": {key: value}}

where a value is {"type": "int_value" | "string_value" | "bool_value" | "double_value"
| "array_value" | ..., "value": ...} (an array's value is a list of such values).
A body that is not protobuf is answered 415, one that does not decode 400, and both are
printed to stderr. Runs until it is killed.
"""

import argparse
import gzip
import json
import sys
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

from google.protobuf.message import DecodeError
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import (
    ExportTraceServiceRequest,
    ExportTraceServiceResponse,
)
from opentelemetry.proto.trace.v1.trace_pb2 import Span, Status


def value(any_value):
    """An `AnyValue` as {"type", "value"}, the type being the name of its `oneof` field."""
    kind = any_value.WhichOneof("value")
    if kind == "array_value":
        inner = [value(v) for v in any_value.array_value.values]
        return {"type": kind, "value": inner}
    if kind == "kvlist_value":
        inner = {kv.key: value(kv.value) for kv in any_value.kvlist_value.values}
        return {"type": kind, "value": inner}
    if kind == "bytes_value":
        return {"type": kind, "value": any_value.bytes_value.hex()}
    if kind is None:
        return {"type": "empty", "value": None}
    return {"type": kind, "value": getattr(any_value, kind)}


def attributes(key_values):
    return {kv.key: value(kv.value) for kv in key_values}


def spans(request):
    """Every span of an `ExportTraceServiceRequest`, as the JSON objects described above."""
    for resource_spans in request.resource_spans:
        resource = attributes(resource_spans.resource.attributes)
        for scope_spans in resource_spans.scope_spans:
            for span in scope_spans.spans:
                yield {
                    "trace_id": span.trace_id.hex(),
                    "span_id": span.span_id.hex(),
                    "parent_span_id": span.parent_span_id.hex(),
                    "name": span.name,
                    "kind": Span.SpanKind.Name(span.kind),
                    "status": Status.StatusCode.Name(span.status.code),
                    "scope": scope_spans.scope.name,
                    "resource": resource,
                    "attributes": attributes(span.attributes),
                }


class Handler(BaseHTTPRequestHandler):
    out = None
    lock = threading.Lock()

    def do_POST(self):
        if self.path != "/v1/traces":
            return self.reply(404, b"only /v1/traces is served", "text/plain")
        content_type = self.headers.get("Content-Type", "")
        if content_type.split(";")[0].strip() != "application/x-protobuf":
            print(f"receiver: a body of type {content_type!r}", file=sys.stderr)
            return self.reply(415, b"send application/x-protobuf", "text/plain")
        body = self.rfile.read(int(self.headers.get("Content-Length", "0")))
        if self.headers.get("Content-Encoding", "") == "gzip":
            body = gzip.decompress(body)
        request = ExportTraceServiceRequest()
        try:
            request.ParseFromString(body)
        except DecodeError as e:
            print(f"receiver: not an ExportTraceServiceRequest: {e}", file=sys.stderr)
            return self.reply(400, b"not an ExportTraceServiceRequest", "text/plain")
        received = list(spans(request))
        with self.lock, open(self.out, "a", encoding="utf-8") as f:
            for span in received:
                f.write(json.dumps(span) + "\n")
        print(f"receiver: {len(received)} spans", file=sys.stderr)
        self.reply(200, ExportTraceServiceResponse().SerializeToString())

    def reply(self, status, body, content_type="application/x-protobuf"):
        self.send_response(status)
        self.send_header("Content-Type", content_type)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, format, *args):
        pass


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", required=True, help="the JSON-lines file of received spans")
    args = parser.parse_args()
    Handler.out = args.out
    open(args.out, "w").close()
    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    print(f"listening on http://127.0.0.1:{server.server_address[1]}", flush=True)
    server.serve_forever()


if __name__ == "__main__":
    main()
