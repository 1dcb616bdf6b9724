"""The modhost protocol for a Python module, standard library only.

A module lives for one call: read one JSON-RPC request line from stdin,
answer one response line on stdout, exit. `describe` answers
descriptor.json (beside this file); `invoke` calls the handler registered
for the capability with the input and a context holding the granted roots.
A handler returns the output, or raises ModuleError (see invalid_input,
root_missing, failed) for an error the caller can act on.
"""

import json
import os
import sys
import traceback

HERE = os.path.dirname(os.path.abspath(__file__))


class ModuleError(Exception):
    """An error answered to the host: code, kind, message, remedy."""

    def __init__(self, kind, message, code=-32000, remedy=None, problems=None):
        super().__init__(message)
        self.kind = kind
        self.message = message
        self.code = code
        self.remedy = remedy
        self.problems = problems or []


def invalid_input(message, problems=None):
    return ModuleError("invalid_input", message, -32602, problems=problems or [message])


def root_missing(name):
    return ModuleError(
        "root_missing",
        f"the {name} root was not granted",
        -32001,
        remedy=f"name {name!r} in this capability's effects",
    )


def failed(message, remedy=None):
    return ModuleError("failed", message, -32000, remedy=remedy)


class Context:
    """What one call is granted: `root(name)` is the path of a granted root."""

    def __init__(self, params):
        self.roots = {
            name: root.get("path")
            for name, root in (params.get("roots") or {}).items()
            if isinstance(root, dict)
        }
        self.request_id = params.get("request_id")

    def root(self, name):
        path = self.roots.get(name)
        if not path:
            raise root_missing(name)
        return path


def _send(message):
    sys.stdout.write(json.dumps(message, separators=(",", ":")) + "\n")
    sys.stdout.flush()


def _error(request_id, code, kind, message, remedy=None, problems=None):
    data = {"kind": kind}
    if remedy:
        data["remedy"] = remedy
    if problems:
        data["problems"] = problems
    _send({"jsonrpc": "2.0", "id": request_id,
           "error": {"code": code, "message": message, "data": data}})


def serve(handlers):
    """Answer one request with `handlers` (capability id -> function)."""
    line = sys.stdin.readline()
    if not line.strip():
        return 0  # stdin closed without a request: nothing to answer
    try:
        request = json.loads(line)
    except ValueError as e:
        _error(None, -32700, "parse", f"the request line is not JSON: {e}")
        return 0
    if (not isinstance(request, dict) or request.get("jsonrpc") != "2.0"
            or not isinstance(request.get("method"), str)):
        rid = request.get("id") if isinstance(request, dict) else None
        _error(rid, -32600, "invalid_request", "not a JSON-RPC 2.0 request")
        return 0
    rid = request.get("id")
    method = request["method"]
    if method == "describe":
        with open(os.path.join(HERE, "descriptor.json"), encoding="utf-8") as f:
            _send({"jsonrpc": "2.0", "id": rid, "result": json.load(f)})
        return 0
    if method != "invoke":
        _error(rid, -32601, "unknown_method", f"unknown method {method!r}")
        return 0
    params = request.get("params") or {}
    capability = params.get("capability")
    handler = handlers.get(capability)
    if handler is None:
        _error(rid, -32003, "unknown_capability", f"no capability {capability!r}")
        return 0
    try:
        output = handler(params.get("input") or {}, Context(params))
    except ModuleError as e:
        _error(rid, e.code, e.kind, e.message, e.remedy, e.problems)
        return 0
    except Exception as e:  # a bug: its traceback goes to stderr, which the host shows
        traceback.print_exc()
        _error(rid, -32603, "internal", f"{type(e).__name__}: {e}")
        return 0
    _send({"jsonrpc": "2.0", "id": rid, "result": {"output": output}})
    return 0
