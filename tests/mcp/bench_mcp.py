#!/usr/bin/env python3
"""Benchmark: `tools/call` latency from the Python MCP client, modhost vs FastMCP.

Every server exposes the same echo tool (`{"message": str}` in, the same
object out) and is driven by the same client code in the same run:

- `modhost mcp` serving the SDK's echo module (`sdk/examples/echo.rs`)
  built as a WebAssembly component: one fresh instance per call, in the
  host's process;
- `modhost mcp` serving the same module built as a native executable: one
  confined process per call (started ahead of the call, see
  `host/src/runner/native/warm.rs`);
- `modhost mcp` serving a POSIX shell script echo (`ECHO_SCRIPT` below): one
  process per call with the cheapest start-up a process can have;
- a FastMCP server (the `mcp` package's own) running the tool in-process.

No tool declares an output schema: the Python client validates structured
content against a declared schema on every call, which would measure the
client's validator rather than the server.

Prints p50 and p90 per server and the ratio of FastMCP's p50 to each
modhost p50. The target is modhost at least 2x faster at p50; pass --check
to exit 1 when the component's ratio is below it (not used in CI: timings on
shared machines are for reading, not asserting).

Build first (release, like a deployment):

    cargo build --release -p modhost
    cargo build --release -p modsdk --example echo
    cargo build --release -p modsdk --example echo --target wasm32-wasip2

Environment: MODHOST_BIN (default $CARGO_TARGET_DIR/release/modhost),
ECHO_NATIVE and ECHO_COMPONENT (default: the example's release builds); a
variant whose file is missing is skipped with a note.
Options: --calls N (default 300), --warmup N (default 30), --check.
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import anyio
from mcp import ClientSession, StdioServerParameters
from mcp.client.stdio import stdio_client

TARGET_DIR = Path(os.environ.get("CARGO_TARGET_DIR", "target"))
MODHOST = Path(os.environ.get("MODHOST_BIN", TARGET_DIR / "release" / "modhost"))
ECHO_NATIVE = Path(os.environ.get("ECHO_NATIVE", TARGET_DIR / "release" / "examples" / "echo"))
ECHO_COMPONENT = Path(
    os.environ.get("ECHO_COMPONENT", TARGET_DIR / "wasm32-wasip2" / "release" / "examples" / "echo.wasm")
)

# One request line in, one response line out. The host writes the request
# keys in a fixed order (`... "input": {...}, "roots": ...`), which is all this
# script relies on; `read` and parameter expansion are shell built-ins, so a
# call costs one exec of /bin/sh and nothing else.
ECHO_SCRIPT = r"""#!/bin/sh
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
    print(f"{name:<20} p50 {p50:7.3f} ms   p90 {p90:7.3f} ms   ({len(timings)} calls)")
    return p50


def modhost_server(root: Path, name: str, module_file: Path | None) -> StdioServerParameters:
    """A home with the echo module installed as `name` (the script when
    `module_file` is None), pinned as an operator would; the server on it."""
    home, workspace = root / name / "home", root / name / "workspace"
    folder = home / "modules" / "echo"
    folder.mkdir(parents=True)
    workspace.mkdir()
    if module_file is None:
        module = folder / "echo"
        module.write_text(ECHO_SCRIPT)
    else:
        module = folder / ("echo.wasm" if module_file.suffix == ".wasm" else "echo")
        shutil.copy(module_file, module)
    module.chmod(0o755)
    # Only pinned modules become tools.
    subprocess.run(
        [str(MODHOST), "--home", str(home), "--workspace", str(workspace), "pin", "echo"],
        stdin=subprocess.DEVNULL,
        stdout=subprocess.DEVNULL,
        check=True,
    )
    env = {"PATH": os.environ.get("PATH", "/usr/bin:/bin")}
    return StdioServerParameters(
        command=str(MODHOST), args=["--home", str(home), "--workspace", str(workspace), "mcp"], env=env
    )


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--calls", type=int, default=300)
    parser.add_argument("--warmup", type=int, default=30)
    parser.add_argument("--check", action="store_true", help="exit 1 unless the component is at least 2x faster")
    args = parser.parse_args()
    if not MODHOST.is_file():
        print(f"error: MODHOST_BIN: {MODHOST} does not exist; build it first (see --help)")
        return 2

    variants = [
        ("component", ECHO_COMPONENT),
        ("native", ECHO_NATIVE),
        ("script", None),
    ]
    results: list[tuple[str, float]] = []
    with tempfile.TemporaryDirectory(prefix="modhost-bench-") as tmp:
        root = Path(tmp)
        for name, module_file in variants:
            if module_file is not None and not module_file.is_file():
                print(f"note: skipping modhost ({name}): {module_file} does not exist (see --help)")
                continue
            server = modhost_server(root, name, module_file)
            timings = anyio.run(measure, server, "echo__echo_echo", args.calls, args.warmup)
            results.append((f"modhost ({name})", timings))
        server_py = root / "fastmcp_echo.py"
        server_py.write_text(FASTMCP_SERVER)
        env = {"PATH": os.environ.get("PATH", "/usr/bin:/bin")}
        fastmcp = StdioServerParameters(command=sys.executable, args=[str(server_py)], env=env)
        fastmcp_ms = anyio.run(measure, fastmcp, "echo", args.calls, args.warmup)

    print("tools/call latency from the Python MCP client (echo tool)")
    p50s = {name: summary(name, timings) for name, timings in results}
    theirs = summary("FastMCP", fastmcp_ms)
    for name, ours in p50s.items():
        print(f"ratio      FastMCP p50 / {name} p50 = {theirs / ours:.2f}x (target: >= 2x)")
    component = p50s.get("modhost (component)")
    if args.check and (component is None or theirs / component < 2):
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
