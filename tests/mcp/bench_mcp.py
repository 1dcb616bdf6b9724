#!/usr/bin/env python3
"""Benchmark: `tools/call` latency from the Python MCP client, modhost vs FastMCP.

Both servers expose the same echo tool (`{"message": str}` in, the same object
out) and are driven by the same client code in the same run:

- `modhost mcp` over a temp home holding one native module, a POSIX shell
  script (`echo`), so the figure is the host's own overhead plus one process
  spawn per call, with no module runtime start-up hiding it;
- a FastMCP server (the `mcp` package's own) running the tool in-process.

Neither tool declares an output schema: the Python client validates
structured content against a declared schema on every call, which would
measure the client's validator rather than the server.

Prints p50 and p90 per server and the ratio of p50s. The target is modhost at
least 2x faster at p50; pass --check to exit 1 when it is not (not used in CI:
timings on shared machines are for reading, not asserting).

Environment: MODHOST_BIN (default $CARGO_TARGET_DIR/debug/modhost).
Options: --calls N (default 300), --warmup N (default 30), --check.
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import anyio
from mcp import ClientSession, StdioServerParameters
from mcp.client.stdio import stdio_client

TARGET = Path(os.environ.get("CARGO_TARGET_DIR", "target")) / "debug"
MODHOST = Path(os.environ.get("MODHOST_BIN", TARGET / "modhost"))

# One request line in, one response line out. The host writes the request
# keys in a fixed order (`... "input": {...}, "roots": ...`), which is all this
# script relies on; `read` and parameter expansion are shell built-ins, so a
# call costs one exec of /bin/sh and nothing else.
ECHO_MODULE = r"""#!/bin/sh
IFS= read -r line
id=${line#*\"id\":}
id=${id%%,*}
case $line in
*'"method":"describe"'*)
  printf '%s\n' '{"jsonrpc":"2.0","id":'"$id"',"result":{"id":"echo","version":"1.0.0","title":"echo","description":"Echoes its input.","capabilities":[{"id":"echo.echo","title":"Echo","description":"Return the message unchanged.","input_schema":{"type":"object","properties":{"message":{"type":"string"}},"required":["message"]},"effects":{"reads":[],"writes":[],"network":false,"spawns":[],"cost":"trivial"}}]}}'
  ;;
*)
  input=${line#*\"input\":}
  input=${input%%,\"roots\":*}
  printf '%s\n' '{"jsonrpc":"2.0","id":'"$id"',"result":{"output":'"$input"'}}'
  ;;
esac
"""

FASTMCP_SERVER = """
from mcp.server.fastmcp import FastMCP

server = FastMCP("echo", log_level="WARNING")


@server.tool()
def echo(message: str) -> dict:
    \"\"\"Return the message unchanged.\"\"\"
    return {"message": message}


server.run()
"""


async def measure(params: StdioServerParameters, tool: str, calls: int, warmup: int) -> list[float]:
    timings = []
    async with stdio_client(params) as (read, write):
        async with ClientSession(read, write) as session:
            await session.initialize()
            await session.list_tools()
            for i in range(warmup + calls):
                started = time.perf_counter()
                result = await session.call_tool(tool, {"message": f"hello {i}"})
                elapsed = time.perf_counter() - started
                if result.isError:
                    raise SystemExit(f"{tool} failed: {result.content}")
                if i >= warmup:
                    timings.append(elapsed * 1000)
    return timings


def summary(name: str, timings: list[float]) -> float:
    timings = sorted(timings)
    p50 = statistics.median(timings)
    p90 = timings[int(len(timings) * 0.9) - 1]
    print(f"{name:<10} p50 {p50:7.3f} ms   p90 {p90:7.3f} ms   ({len(timings)} calls)")
    return p50


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--calls", type=int, default=300)
    parser.add_argument("--warmup", type=int, default=30)
    parser.add_argument("--check", action="store_true", help="exit 1 unless modhost is at least 2x faster at p50")
    args = parser.parse_args()
    if not MODHOST.is_file():
        print(f"error: MODHOST_BIN: {MODHOST} does not exist; build it first")
        return 2

    with tempfile.TemporaryDirectory(prefix="modhost-bench-") as tmp:
        root = Path(tmp)
        home, workspace = root / "home", root / "workspace"
        module = home / "modules" / "echo" / "echo"
        module.parent.mkdir(parents=True)
        module.write_text(ECHO_MODULE)
        module.chmod(0o755)
        workspace.mkdir()
        # Only pinned modules become tools: approve it as an operator would.
        subprocess.run(
            [str(MODHOST), "--home", str(home), "--workspace", str(workspace), "pin", "echo"],
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
            check=True,
        )
        server_py = root / "fastmcp_echo.py"
        server_py.write_text(FASTMCP_SERVER)
        env = {"PATH": os.environ.get("PATH", "/usr/bin:/bin")}

        modhost = StdioServerParameters(
            command=str(MODHOST), args=["--home", str(home), "--workspace", str(workspace), "mcp"], env=env
        )
        fastmcp = StdioServerParameters(command=sys.executable, args=[str(server_py)], env=env)

        modhost_ms = anyio.run(measure, modhost, "echo__echo_echo", args.calls, args.warmup)
        fastmcp_ms = anyio.run(measure, fastmcp, "echo", args.calls, args.warmup)

    print("tools/call latency from the Python MCP client (echo tool)")
    ours = summary("modhost", modhost_ms)
    theirs = summary("FastMCP", fastmcp_ms)
    ratio = theirs / ours
    print(f"ratio      FastMCP p50 / modhost p50 = {ratio:.2f}x (target: >= 2x)")
    if args.check and ratio < 2:
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
