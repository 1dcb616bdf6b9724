"""A hostile stdio MCP server for the attack tests of
tests/it/mcp_server_modules.rs.

Raw JSON-RPC, one message a line, no SDK: an SDK would keep it from
breaking the protocol, which is what it is for. Each tool is one attack;
HOSTILE_LIST chooses what tools/list answers:

- unset: the tools below;
- "collide": two tools whose names differ only in punctuation
  (`get.time`, `get_time`), the same name for a provider once mangled;
- "loop": a page whose nextCursor leads back to itself.
"""

import json
import os
import sys

SUM = {
    "type": "object",
    "properties": {"sum": {"type": "integer"}},
    "required": ["sum"],
}
OBJECT = {"type": "object"}
TOOLS = [
    {"name": "flood", "description": "Logs forever and never answers.", "inputSchema": OBJECT},
    {"name": "flood_quietly", "description": "Sends notifications the bridge drops, forever.",
     "inputSchema": OBJECT},
    {"name": "ask_roots", "description": "Asks for its roots 100000 times.", "inputSchema": OBJECT},
    {
        "name": "link",
        "description": "Answers with a resource link to each path.",
        "inputSchema": {
            "type": "object",
            "properties": {"paths": {"type": "array", "items": {"type": "string"}}},
        },
    },
    {
        "name": "bad_structured",
        "description": "Structured content its outputSchema forbids.",
        "inputSchema": OBJECT,
        "outputSchema": SUM,
    },
    {
        "name": "good_structured",
        "description": "Structured content as its outputSchema says.",
        "inputSchema": OBJECT,
        "outputSchema": SUM,
    },
]


def send(message):
    sys.stdout.write(json.dumps(message) + "\n")
    sys.stdout.flush()


def receive():
    line = sys.stdin.readline()
    if not line:
        sys.exit(0)
    return json.loads(line)


def listed(params):
    mode = os.environ.get("HOSTILE_LIST", "")
    if mode == "collide":
        good = next(tool for tool in TOOLS if tool["name"] == "good_structured")
        return {"tools": [dict(good, name="get.time"), dict(good, name="get_time")]}
    if mode == "loop":
        return {"tools": TOOLS if "cursor" not in params else [], "nextCursor": "again"}
    return {"tools": TOOLS}


def called(name, arguments):
    if name == "flood":
        while True:
            send({"jsonrpc": "2.0", "method": "notifications/message",
                  "params": {"level": "info", "data": "still working"}})
    if name == "flood_quietly":
        while True:
            send({"jsonrpc": "2.0", "method": "notifications/progress",
                  "params": {"progressToken": "not-the-calls", "progress": 1}})
    if name == "ask_roots":
        for n in range(100000):
            send({"jsonrpc": "2.0", "id": f"roots-{n}", "method": "roots/list"})
            receive()
        return {"content": [{"type": "text", "text": "asked 100000 times"}]}
    if name == "link":
        links = [{"type": "resource_link", "uri": "file://" + path, "name": path}
                 for path in arguments.get("paths", [])]
        return {"content": links}
    if name == "bad_structured":
        return {"content": [{"type": "text", "text": "five"}], "structuredContent": {"sum": "five"}}
    if name == "good_structured":
        return {"content": [{"type": "text", "text": "5"}], "structuredContent": {"sum": 5}}
    return {"content": [{"type": "text", "text": f"no tool {name}"}], "isError": True}


def main():
    while True:
        message = receive()
        if "id" not in message or "method" not in message:
            continue
        method, params = message["method"], message.get("params") or {}
        if method == "initialize":
            result = {"protocolVersion": "2025-06-18", "capabilities": {"tools": {}},
                      "serverInfo": {"name": "hostile", "version": "1.0.0"}}
        elif method == "tools/list":
            result = listed(params)
        elif method == "tools/call":
            result = called(params.get("name"), params.get("arguments") or {})
        else:
            send({"jsonrpc": "2.0", "id": message["id"],
                  "error": {"code": -32601, "message": f"no method {method}"}})
            continue
        send({"jsonrpc": "2.0", "id": message["id"], "result": result})


main()
