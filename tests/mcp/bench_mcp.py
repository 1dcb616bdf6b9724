#!/usr/bin/env python3
"""Benchmark: `tools/call` latency from the Python MCP client, modhost beside its anchors.

Every server exposes the same echo tool (`{"message": str}` in, the same
object out, no output schema) and is driven by the same client code in the
same run, in alternating rounds (each round starts every server afresh, in
a rotated order, so all of them see the same machine load):

- rmcp: the official Rust MCP SDK, one long-lived process, a `#[tool]` echo
  (`tests/mcp/rmcp_echo`, outside the workspace): the floor;
- FastMCP: the `mcp` package's own Python server, the tool in-process;
- `modhost mcp` serving the SDK's echo example (`sdk/examples/echo.rs`) as a
  WebAssembly component: one fresh instance per call, in the host's process;
- `modhost mcp` serving the same module as a native executable: one confined
  process per call (landlock, seccomp, no capability; started ahead of its
  call, see `host/runner/src/native/warm.rs`), no process serves two calls;
  twice: built for the host's usual target (dynamically linked to glibc)
  and as a static musl executable. A process per call pays its C library's
  start-up on every call: glibc's probes the CPU (`cpuid`, which traps to
  the hypervisor in a virtual machine: about 1 ms of CPU on the machine
  this was written on), musl's does not, and which of the two a module is
  built with decides most of the native figure (see modproto/MODULES.md).

No tool declares an output schema: the Python client validates structured
content against a declared schema on every call, which would measure the
client's validator rather than the server.

Prints each server's p50 and p90 over all rounds and its p50 ratio to
rmcp's, then the same ratio taken round by round (each round's p50 over
rmcp's p50 of that same round: the median over rounds, and the lowest and
highest) and the first call of a freshly started server (the median over
rounds; the modhost homes are pinned, so the compiled component cache is
warm). The rounds are many and short because this machine's speed drifts
over seconds (a neighbour on the hypervisor, the page cache): a drift then
touches every server alike within a round, and the round ratios show how
far one run's figure can be trusted. Targets: component <= 1.2x rmcp,
native <= FastMCP and <= 2.5x rmcp, the component's first call <= 5 ms.
Figures are for reading, ratios for comparing: this is not a test, and
nothing fails on them.

Build first (release, like a deployment), with CARGO_TARGET_DIR set:

    cargo build --release -p modhost-cli
    cargo build --release -p modsdk --example echo
    cargo build --release -p modsdk --example echo --target wasm32-wasip2
    rustup target add x86_64-unknown-linux-musl
    cargo build --release -p modsdk --example echo --target x86_64-unknown-linux-musl
    cargo build --release --manifest-path tests/mcp/rmcp_echo/Cargo.toml

Environment: MODHOST_BIN (default $CARGO_TARGET_DIR/release/modhost),
ECHO_NATIVE, ECHO_STATIC, ECHO_COMPONENT (default: the example's release builds),
RMCP_ECHO (default $CARGO_TARGET_DIR/release/rmcp_echo); a server whose
file is missing is skipped with a note.
Options: --rounds N (default 10), --calls N per round (default 100),
--warmup N per round (default 20).
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
from dataclasses import dataclass, field
from pathlib import Path

import anyio
from mcp import ClientSession, StdioServerParameters
from mcp.client.stdio import stdio_client

TARGET_DIR = Path(os.environ.get("CARGO_TARGET_DIR", "target"))
MODHOST = Path(os.environ.get("MODHOST_BIN", TARGET_DIR / "release" / "modhost"))
ECHO_NATIVE = Path(os.environ.get("ECHO_NATIVE", TARGET_DIR / "release" / "examples" / "echo"))
ECHO_STATIC = Path(
    os.environ.get("ECHO_STATIC", TARGET_DIR / "x86_64-unknown-linux-musl" / "release" / "examples" / "echo")
)
ECHO_COMPONENT = Path(
    os.environ.get("ECHO_COMPONENT", TARGET_DIR / "wasm32-wasip2" / "release" / "examples" / "echo.wasm")
)
RMCP_ECHO = Path(os.environ.get("RMCP_ECHO", TARGET_DIR / "release" / "rmcp_echo"))

FASTMCP_SERVER = """
from mcp.server.fastmcp import FastMCP

server = FastMCP("echo", log_level="WARNING")


@server.tool()
def echo(message: str) -> dict:
    \"\"\"Return the message unchanged.\"\"\"
    return {"message": message}


server.run()
"""


@dataclass
class Server:
    name: str
    params: StdioServerParameters
    tool: str
    timings: list[float] = field(default_factory=list)
    round_p50s: list[float] = field(default_factory=list)
    first_calls: list[float] = field(default_factory=list)


async def measure(server: Server, calls: int, warmup: int) -> None:
    """One round: start the server, time its first call, then `calls` more
    after `warmup`; the server ends with the session."""
    timings = []
    async with stdio_client(server.params) as (read, write):
        async with ClientSession(read, write) as session:
            await session.initialize()
            await session.list_tools()
            for i in range(1 + warmup + calls):
                started = time.perf_counter()
                result = await session.call_tool(server.tool, {"message": f"hello {i}"})
                elapsed = (time.perf_counter() - started) * 1000
                if result.isError:
                    raise SystemExit(f"{server.name}: {server.tool} failed: {result.content}")
                if i == 0:
                    server.first_calls.append(elapsed)
                elif i > warmup:
                    timings.append(elapsed)
    server.timings.extend(timings)
    server.round_p50s.append(statistics.median(timings))


def modhost_server(root: Path, name: str, module_file: Path) -> StdioServerParameters:
    """A home with the echo module installed and pinned, as an operator
    would (pinning describes it, which also fills the compiled component
    cache); the server on it."""
    home, workspace = root / name.replace(" ", "-") / "home", root / name.replace(" ", "-") / "workspace"
    folder = home / "modules" / "echo"
    folder.mkdir(parents=True)
    workspace.mkdir()
    module = folder / ("echo.wasm" if module_file.suffix == ".wasm" else "echo")
    shutil.copy(module_file, module)
    module.chmod(0o755)
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


def servers(root: Path) -> list[Server]:
    env = {"PATH": os.environ.get("PATH", "/usr/bin:/bin")}
    found = []
    if RMCP_ECHO.is_file():
        found.append(Server("rmcp", StdioServerParameters(command=str(RMCP_ECHO), args=[], env=env), "echo"))
    else:
        print(f"note: skipping rmcp: {RMCP_ECHO} does not exist (see --help)")
    server_py = root / "fastmcp_echo.py"
    server_py.write_text(FASTMCP_SERVER)
    found.append(Server("FastMCP", StdioServerParameters(command=sys.executable, args=[str(server_py)], env=env), "echo"))
    if not MODHOST.is_file():
        print(f"note: skipping modhost: MODHOST_BIN {MODHOST} does not exist (see --help)")
        return found
    for name, module_file in (
        ("component", ECHO_COMPONENT),
        ("native", ECHO_NATIVE),
        ("native static", ECHO_STATIC),
    ):
        if not module_file.is_file():
            print(f"note: skipping modhost ({name}): {module_file} does not exist (see --help)")
            continue
        found.append(Server(f"modhost ({name})", modhost_server(root, name, module_file), "echo__echo_echo"))
    # The host trusts a file's identity for its digest only once the file is
    # older than its racy window (`RACY`, one second, host/runner/src/file_identity.rs);
    # until then each call reads and hashes the pinned files again. A
    # deployed home was pinned longer ago than that: wait it out instead of
    # measuring the first second after pinning.
    time.sleep(1.2)
    return found


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--rounds", type=int, default=10)
    parser.add_argument("--calls", type=int, default=100)
    parser.add_argument("--warmup", type=int, default=20)
    args = parser.parse_args()

    with tempfile.TemporaryDirectory(prefix="modhost-bench-") as tmp:
        all_servers = servers(Path(tmp))
        for round_index in range(args.rounds):
            shift = round_index % len(all_servers)
            for server in all_servers[shift:] + all_servers[:shift]:
                anyio.run(measure, server, args.calls, args.warmup)

    print(f"tools/call latency from the Python MCP client (echo tool), {args.rounds} alternating rounds")
    rmcp = next((s for s in all_servers if s.name == "rmcp"), None)
    rmcp_p50 = statistics.median(rmcp.timings) if rmcp else None
    for server in all_servers:
        timings = sorted(server.timings)
        p50 = statistics.median(timings)
        p90 = timings[int(len(timings) * 0.9) - 1]
        first = statistics.median(server.first_calls)
        if rmcp:
            ratio = f"{p50 / rmcp_p50:5.2f}x rmcp"
            by_round = [mine / floor for mine, floor in zip(server.round_p50s, rmcp.round_p50s)]
            spread = (
                f"round ratios median {statistics.median(by_round):4.2f}x"
                f" ({min(by_round):4.2f} to {max(by_round):4.2f})"
            )
        else:
            ratio, spread = "   (no rmcp)", f"{len(server.round_p50s)} rounds"
        print(
            f"{server.name:<23} p50 {p50:6.3f} ms  p90 {p90:6.3f} ms  {ratio}"
            f"  {spread}  first call {first:6.2f} ms  ({len(timings)} calls)"
        )
    print("targets: modhost (component) <= 1.2x rmcp, first call <= 5 ms;"
          " modhost (native) <= FastMCP and <= 2.5x rmcp (the static build: a dynamically"
          " linked glibc module pays glibc's start-up on every call)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
