#!/usr/bin/env python3
"""Benchmark: what running an MCP server per call costs, against the same
server run persistently, in one run (issue 38).

Each tiny test server (tests/mcp/servers/tiny_server.py, written with the
Python `mcp` SDK, and tiny_server.mjs, written with the TypeScript SDK) is
driven by the Python SDK's own client (`mcp.ClientSession` over stdio), its
`echo` tool called over and over, two ways:

- persistent: the client starts the server once and calls it, as MCP clients
  run servers today (no confinement, one process serving every call);
- per call: `modhost mcp` serving the same server installed as a module
  (`modhost install --mcp`): every call starts a fresh server process under
  the call's confinement (landlock, seccomp, its own process group and
  memory cgroup), runs initialize, tools/list (checked against the pinned
  snapshot) and the one tools/call, and ends it.

- session: the same server installed a second time with `--lifetime
  session`, served by `modhost mcp`: one confined server process for the
  whole connection (confined to the union of its tools' grants), each call
  one `tools/list` check and one `tools/call` on it.

- fresh, unconfined: the same client starting the server afresh for every
  call itself (spawn, initialize, the call; its closing not counted), with
  no host and no confinement: the server's own start-up, which per call
  pays anyway.

Rounds alternate the eight (each round in a rotated order) so machine drift
touches all alike. Prints each one's p50 and p90 over all calls, and per
server the ratio of the per-call p50 to the persistent p50 (the price of
"no call sees another's data") and to the fresh, unconfined p50 (the part
of it modhost adds: the bridge, confinement, the pinned tools checked), and
the ratio of the session p50 to the persistent p50 (what a session costs
over the SDK's own persistent client: the host's pipeline per call).
Figures are for reading, ratios for comparing: this is not a test.

Needs tests/setup (the servers, the SDK venvs) and the binaries, built with
CARGO_TARGET_DIR set:

    cargo build --release -p modhost-cli -p mcp_bridge

Environment: MODHOST_BIN (default $CARGO_TARGET_DIR/release/modhost), and
MCP_BRIDGE (default: mcp_bridge beside it).
Run with the Python SDK client's venv: tests/mcp/.venv-mcp2/bin/python
tests/mcp/bench_mcp_server_modules.py [--rounds N] [--calls N] [--warmup N].
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

HERE = Path(__file__).resolve().parent
SERVERS = HERE / "servers"
TARGET_DIR = Path(os.environ.get("CARGO_TARGET_DIR", "target"))
MODHOST = Path(os.environ.get("MODHOST_BIN", TARGET_DIR / "release" / "modhost"))
BRIDGE = Path(os.environ.get("MCP_BRIDGE", MODHOST.parent / "mcp_bridge"))


def need(path: Path, what: str) -> None:
    if not path.exists():
        sys.exit(f"{what} is missing ({path}); see this script's docstring for how to build or install it")


def python_interpreter() -> str:
    file = SERVERS / ".python-interpreter"
    need(file, "the Python servers (tests/mcp/servers/setup-servers)")
    return file.read_text().strip()


def node() -> str:
    found = shutil.which("node")
    if not found:
        sys.exit("node is not on PATH")
    return os.path.realpath(found)


def install(home: Path, scratch: Path) -> None:
    """The two tiny servers installed as modules `tiny` and `tinyts`."""
    (home / "config.toml").write_text(
        f'[binaries]\npython3 = "{python_interpreter()}"\nnode = "{node()}"\n'
        '[[approval.rules]]\nmodule = "tiny"\ndecision = "allow"\n'
        '[[approval.rules]]\nmodule = "tinyts"\ndecision = "allow"\n'
        '[[approval.rules]]\nmodule = "tinysess"\ndecision = "allow"\n'
        '[[approval.rules]]\nmodule = "tinytssess"\ndecision = "allow"\n'
        "[lockdown]\nenabled = false\n"
    )
    py_source = scratch / "tiny-py"
    subprocess.run(["cp", "-al", str(SERVERS / ".python"), str(py_source)], check=True)
    shutil.copy(SERVERS / "tiny_server.py", py_source / "tiny_server.py")
    ts_source = scratch / "tiny-ts"
    ts_source.mkdir()
    subprocess.run(["cp", "-al", str(HERE / "ts" / "node_modules"), str(ts_source / "node_modules")], check=True)
    shutil.copy(SERVERS / "tiny_server.mjs", ts_source / "tiny_server.mjs")
    session = ["--lifetime", "session"]
    for source, id, env, command in [
        (py_source, "tiny", ["--env", "PYTHONPATH={module}"], ["python3", "{module}/tiny_server.py"]),
        (ts_source, "tinyts", [], ["node", "{module}/tiny_server.mjs"]),
        (py_source, "tinysess", ["--env", "PYTHONPATH={module}", *session], ["python3", "{module}/tiny_server.py"]),
        (ts_source, "tinytssess", session, ["node", "{module}/tiny_server.mjs"]),
    ]:
        subprocess.run(
            [str(MODHOST), "--home", str(home), "install", "--mcp", str(source), "--id", id,
             "--bridge", str(BRIDGE), *env, "--", *command],
            check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
        )


async def measure(params: StdioServerParameters, tool: str, calls: int, warmup: int) -> list[float]:
    """Seconds per `tools/call` of `tool`, after `warmup` calls."""
    times: list[float] = []
    async with stdio_client(params) as (read, write):
        async with ClientSession(read, write) as session:
            await session.initialize()
            for i in range(warmup + calls):
                started = time.perf_counter()
                result = await session.call_tool(tool, {"text": f"hello {i}"})
                elapsed = time.perf_counter() - started
                if getattr(result, "is_error", None) or getattr(result, "isError", False):
                    sys.exit(f"{tool} failed: {result.content}")
                if i >= warmup:
                    times.append(elapsed)
    return times


async def measure_fresh(params: StdioServerParameters, tool: str, calls: int, warmup: int) -> list[float]:
    """Seconds from starting the server to the result of one call of `tool`
    (its start, initialize, the call), each call with a server of its own;
    the client's closing of the server after the result is not counted (the
    SDK's waits for the process to end; the bridge kills it)."""
    times: list[float] = []
    for i in range(warmup + calls):
        started = time.perf_counter()
        async with stdio_client(params) as (read, write):
            async with ClientSession(read, write) as session:
                await session.initialize()
                result = await session.call_tool(tool, {"text": f"hello {i}"})
                elapsed = time.perf_counter() - started
        if getattr(result, "is_error", None) or getattr(result, "isError", False):
            sys.exit(f"{tool} failed: {result.content}")
        if i >= warmup:
            times.append(elapsed)
    return times


def quantile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--calls", type=int, default=20)
    parser.add_argument("--warmup", type=int, default=2)
    args = parser.parse_args()
    need(MODHOST, "modhost")
    need(BRIDGE, "the MCP bridge")
    with tempfile.TemporaryDirectory(prefix="bench-mcp-modules-") as scratch:
        scratch = Path(scratch)
        home = scratch / "home"
        home.mkdir()
        workspace = scratch / "workspace"
        workspace.mkdir()
        install(home, scratch)
        served = StdioServerParameters(
            command=str(MODHOST), args=["--home", str(home), "--workspace", str(workspace), "mcp"]
        )
        python_server = StdioServerParameters(
            command=python_interpreter(),
            args=[str(SERVERS / "tiny_server.py")],
            env={"PYTHONPATH": str(SERVERS / ".python"), "PATH": os.environ.get("PATH", "")},
        )
        typescript_server = StdioServerParameters(
            command=node(),
            args=[str(scratch / "tiny-ts" / "tiny_server.mjs")],
            env={"PATH": os.environ.get("PATH", "")},
        )
        ways = {
            "python, persistent": (measure, python_server, "echo"),
            "python, fresh, unconfined": (measure_fresh, python_server, "echo"),
            "python, per call (modhost)": (measure, served, "tiny__tiny_echo"),
            "python, session (modhost)": (measure, served, "tinysess__tinysess_echo"),
            "typescript, persistent": (measure, typescript_server, "echo"),
            "typescript, fresh, unconfined": (measure_fresh, typescript_server, "echo"),
            "typescript, per call (modhost)": (measure, served, "tinyts__tinyts_echo"),
            "typescript, session (modhost)": (measure, served, "tinytssess__tinytssess_echo"),
        }
        times: dict[str, list[float]] = {name: [] for name in ways}
        names = list(ways)
        for round_ in range(args.rounds):
            order = names[round_ % len(names):] + names[: round_ % len(names)]
            for name in order:
                how, params, tool = ways[name]
                times[name] += anyio.run(how, params, tool, args.calls, args.warmup)
    print(f"{args.rounds} rounds x {args.calls} calls (after {args.warmup} warm-up calls each)")
    for name in names:
        print(f"  {name:32} p50 {quantile(times[name], 0.5) * 1000:8.2f} ms   p90 {quantile(times[name], 0.9) * 1000:8.2f} ms")
    for server in ["python", "typescript"]:
        per_call = statistics.median(times[f"{server}, per call (modhost)"])
        persistent = statistics.median(times[f"{server}, persistent"])
        fresh = statistics.median(times[f"{server}, fresh, unconfined"])
        session = statistics.median(times[f"{server}, session (modhost)"])
        print(
            f"  {server}: per call (modhost) / persistent, p50: {per_call / persistent:.1f}x;"
            f" per call (modhost) / fresh, unconfined, p50: {per_call / fresh:.2f}x;"
            f" session (modhost) / persistent, p50: {session / persistent:.2f}x"
        )


if __name__ == "__main__":
    main()
