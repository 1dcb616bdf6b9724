#!/usr/bin/env python3
"""Benchmark: MCP over streamable HTTP, `modhost mcp --http` beside rmcp's server.

Both servers expose the same echo tool (`{"message": str}` in, the same
object out, no output schema) and are driven by the same load generator in
the same run, at 1, 8 and 32 concurrent clients:

- rmcp: the official Rust MCP SDK's streamable HTTP server, stateless, JSON
  answers, the tool in-process on a multi-threaded runtime
  (`tests/mcp/rmcp_echo --http`, outside the workspace): the floor;
- `modhost mcp --http` serving the SDK's echo example (`sdk/examples/echo.rs`)
  as a WebAssembly component: a fresh instance per call, in the host's
  process, every call through the whole pipeline (policy, pin and snapshot
  checks, schema validation, audit).

Every call is a `tools/call` of revision 2026-07-28: stateless, each POST
carries `_meta` (protocol version, client info and capabilities) and the
transport's headers (`MCP-Protocol-Version`, `Mcp-Method`, `Mcp-Name`).
The load generator is `mcp_http_load` (`tests/mcp/rmcp_echo/src/bin/`): N
threads, each with one keep-alive connection, calling back to back; plain
std and blocking sockets, so it costs the machine as little per call as a
client can, the same for both servers; every answer is checked (the
message must come back, `isError` false).

The servers start once and serve the whole run, as deployed servers do.
The run is many short rounds: each round measures every concurrency level
on both servers, in an order that rotates from round to round, each
measurement a warm-up then a timed window. The machine's speed drifts over
seconds (a neighbour on the hypervisor), and the load generator shares the
machine's cores with the server; a drift then touches both servers alike
within a round, and the round-by-round ratios show how far the figure can
be trusted.

Prints, per request kind, concurrency level and server: requests/s
(median over rounds), p50 and p99 latency (median over rounds), the
server's CPU time per request (user + system, from /proc, warm-up
included: what a request costs the machine, whatever the generator's
share), failed calls; then modhost's throughput over rmcp's, as the ratio
of the medians and round by round (median, lowest, highest). Two kinds:
`tools/call` of the echo tool, what the target is about (modhost >= 0.8x
rmcp's throughput at every level), and `tools/list`, which runs no tool:
the transport and the protocol alone, so the difference between the two
kinds is what running a tool costs each server. Figures are for reading,
ratios for comparing: this is not a test, and nothing fails on a ratio;
it exits 1 when a call failed, since then the figures measure something
else.

Build first (release, like a deployment), with CARGO_TARGET_DIR set:

    cargo build --release -p modhost-cli
    cargo build --release -p modsdk --example echo --target wasm32-wasip2
    cargo build --release --manifest-path tests/mcp/rmcp_echo/Cargo.toml

(the last builds both `rmcp_echo` and `mcp_http_load`), then run
`tests/mcp/bench_mcp_http.py`. Needs Python 3 only (no package).

Options: --rounds N (default 5), --seconds S per measurement (default 2),
--warmup S before each (default 0.5), --clients 1,8,32, --no-list.

Environment: MODHOST_BIN (default $CARGO_TARGET_DIR/release/modhost),
ECHO_COMPONENT (default the example's release wasm32-wasip2 build),
RMCP_ECHO and MCP_HTTP_LOAD (default $CARGO_TARGET_DIR/release/rmcp_echo and
…/mcp_http_load). A missing file is an error naming the command that builds it.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import shutil
import statistics
import subprocess
import sys
import tempfile
import threading
import time
import urllib.request
from dataclasses import dataclass, field
from pathlib import Path

TARGET_DIR = Path(os.environ.get("CARGO_TARGET_DIR", "target"))
MODHOST = Path(os.environ.get("MODHOST_BIN", TARGET_DIR / "release" / "modhost"))
ECHO_COMPONENT = Path(
    os.environ.get("ECHO_COMPONENT", TARGET_DIR / "wasm32-wasip2" / "release" / "examples" / "echo.wasm")
)
RMCP_ECHO = Path(os.environ.get("RMCP_ECHO", TARGET_DIR / "release" / "rmcp_echo"))
MCP_HTTP_LOAD = Path(os.environ.get("MCP_HTTP_LOAD", TARGET_DIR / "release" / "mcp_http_load"))

BUILDS = {
    MODHOST: "cargo build --release -p modhost-cli",
    ECHO_COMPONENT: "cargo build --release -p modsdk --example echo --target wasm32-wasip2",
    RMCP_ECHO: "cargo build --release --manifest-path tests/mcp/rmcp_echo/Cargo.toml",
    MCP_HTTP_LOAD: "cargo build --release --manifest-path tests/mcp/rmcp_echo/Cargo.toml",
}

#: The line both servers print on stderr once they listen.
READY = re.compile(r"serving MCP over HTTP at (http://\S+)")

CALL, LIST = "tools/call", "tools/list"
TITLES = {
    CALL: "tools/call of the echo tool (modhost: a fresh component instance per call):",
    LIST: "tools/list (no tool runs: the transport and the protocol alone, for comparison):",
}

META = {
    "io.modelcontextprotocol/protocolVersion": "2026-07-28",
    "io.modelcontextprotocol/clientInfo": {"name": "bench_mcp_http", "version": "0"},
    "io.modelcontextprotocol/clientCapabilities": {},
}


@dataclass
class Measurement:
    rps: float
    p50_ms: float
    p99_ms: float
    calls: int
    failed: int
    first_failure: str | None
    #: The server's CPU time (user + system) over every request of the
    #: measurement, warm-up included, per request.
    cpu_us: float


@dataclass
class Server:
    name: str
    command: list[str]
    process: subprocess.Popen | None = None
    url: str = ""
    tool: str = ""
    log: Path | None = None
    #: By (kind, concurrency level): one measurement per round.
    rounds: dict[tuple[str, int], list[Measurement]] = field(default_factory=dict)

    def start(self, env: dict[str, str], log: Path) -> None:
        """Start the server and wait for its ready line (60 s). Its stderr
        (modhost writes a log line per request) goes to the file `log`, not
        to a pipe this process would have to drain on the CPU it measures."""
        self.log = log
        with open(log, "w") as stderr:
            self.process = subprocess.Popen(
                self.command, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=stderr, env=env
            )
        started = time.monotonic()
        while True:
            found = READY.search(log.read_text(errors="replace"))
            if found:
                self.url = found.group(1)
                break
            if self.process.poll() is not None or time.monotonic() - started > 60:
                self.stop()
                raise SystemExit(
                    f"{self.name} did not say it serves within 60 s: {' '.join(self.command)}\n{self.stderr_tail()}"
                )
            time.sleep(0.05)
        self.tool = echo_tool(self.url)

    def stderr_tail(self) -> str:
        return "\n".join(self.log.read_text(errors="replace").splitlines()[-20:]) if self.log else ""

    def stop(self) -> None:
        if self.process and self.process.poll() is None:
            self.process.terminate()
            try:
                self.process.wait(10)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait()


def post(url: str, method: str, params: dict) -> dict:
    """One 2026-07-28 request; its JSON-RPC response (a JSON body or the
    response event of an SSE stream)."""
    body = json.dumps({"jsonrpc": "2.0", "id": 1, "method": method, "params": {**params, "_meta": META}})
    headers = {
        "Content-Type": "application/json",
        "Accept": "application/json, text/event-stream",
        "MCP-Protocol-Version": "2026-07-28",
        "Mcp-Method": method,
    }
    if "name" in params:
        headers["Mcp-Name"] = params["name"]
    request = urllib.request.Request(url, data=body.encode(), headers=headers, method="POST")
    with urllib.request.urlopen(request, timeout=30) as response:
        text = response.read().decode()
        if response.headers.get_content_type() == "text/event-stream":
            for event in text.split("\n\n"):
                data = "\n".join(line[5:].lstrip() for line in event.splitlines() if line.startswith("data:"))
                if data and "id" in json.loads(data):
                    return json.loads(data)
            raise SystemExit(f"{url}: no response in the event stream: {text}")
        return json.loads(text)


def echo_tool(url: str) -> str:
    """The name of the server's echo tool, from `tools/list`."""
    listed = post(url, "tools/list", {})
    names = [tool["name"] for tool in listed.get("result", {}).get("tools", [])]
    for name in names:
        if name == "echo" or name.startswith("echo__"):
            return name
    raise SystemExit(f"{url}: no echo tool in {names} ({listed})")


def modhost_home(root: Path) -> tuple[Path, Path]:
    """A home with the echo component installed and pinned, as an operator
    would (pinning describes it, which also fills the compiled component
    cache): (home, workspace)."""
    home, workspace = root / "home", root / "workspace"
    folder = home / "modules" / "echo"
    folder.mkdir(parents=True)
    workspace.mkdir()
    shutil.copy(ECHO_COMPONENT, folder / "echo.wasm")
    pin = subprocess.run(
        [str(MODHOST), "--home", str(home), "--workspace", str(workspace), "pin", "echo"],
        stdin=subprocess.DEVNULL, capture_output=True, text=True, check=False,
    )
    if pin.returncode != 0:
        raise SystemExit(f"modhost pin echo failed:\n{pin.stderr}")
    # The host trusts a file's identity for its digest only once the file is
    # older than its racy window (one second, host/runner/src/file_identity.rs);
    # a deployed home was pinned longer ago than that.
    time.sleep(1.2)
    return home, workspace


def cpu_ticks(pid: int) -> int:
    """User + system time of process `pid`, in clock ticks."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return int(fields[11]) + int(fields[12])


def measure(server: Server, kind: str, clients: int, seconds: float, warmup: float) -> Measurement:
    command = [
        str(MCP_HTTP_LOAD), "--url", server.url, "--tool", server.tool, "--clients", str(clients),
        "--seconds", str(seconds), "--warmup", str(warmup),
    ]
    if kind == LIST:
        command.append("--list")
    before = cpu_ticks(server.process.pid)
    run = subprocess.run(command, stdin=subprocess.DEVNULL, capture_output=True, text=True, check=False)
    ticks = cpu_ticks(server.process.pid) - before
    if run.returncode != 0:
        raise SystemExit(f"mcp_http_load failed against {server.name}: {run.stderr}")
    report = json.loads(run.stdout)
    if server.process and server.process.poll() is not None:
        raise SystemExit(
            f"{server.name} exited during the run ({server.process.returncode}):\n{server.stderr_tail()}"
        )
    return Measurement(
        rps=report["rps"], p50_ms=report["p50_ms"], p99_ms=report["p99_ms"], calls=report["calls"],
        failed=report["failed"], first_failure=report["first_failure"],
        cpu_us=ticks / os.sysconf("SC_CLK_TCK") * 1e6 / max(report["requests"], 1),
    )


class StdioServer:
    """`modhost mcp` over stdio on the same home, one long-lived
    connection: the same calls with no HTTP, so that the server's CPU per
    call over HTTP minus this is what the transport adds to a call. A
    client over stdio keeps at most `STDIO_MAX_IN_FLIGHT` calls in flight
    (the server's bound, host/mcp/src/server.rs)."""

    def __init__(self, command: list[str], env: dict[str, str], log: Path):
        with open(log, "w") as stderr:
            self.process = subprocess.Popen(
                command, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=stderr, env=env, bufsize=0
            )
        self.next_id = 0
        self.request("initialize", {
            "protocolVersion": "2025-06-18", "capabilities": {},
            "clientInfo": {"name": "bench_mcp_http", "version": "0"},
        })
        self.send({"jsonrpc": "2.0", "method": "notifications/initialized"})
        self.rounds: dict[int, list[tuple[float, float]]] = {}

    def send(self, message: dict) -> None:
        self.process.stdin.write((json.dumps(message) + "\n").encode())

    def request(self, method: str, params: dict) -> dict:
        self.next_id += 1
        self.send({"jsonrpc": "2.0", "id": self.next_id, "method": method, "params": params})
        return json.loads(self.process.stdout.readline())

    def measure(self, tool: str, window: int, seconds: float, warmup: float) -> tuple[float, float]:
        """Calls for `warmup` + `seconds` with `window` in flight: (calls/s
        in the timed part, server CPU per call over all of it, in us)."""
        slots = threading.Semaphore(window)
        stop = threading.Event()
        sent = []

        def writer() -> None:
            while not stop.is_set():
                slots.acquire()
                if stop.is_set():
                    break
                self.next_id += 1
                sent.append(self.next_id)
                self.send({"jsonrpc": "2.0", "id": self.next_id, "method": "tools/call",
                           "params": {"name": tool, "arguments": {"message": f"hello {self.next_id}"}}})

        before = cpu_ticks(self.process.pid)
        started = time.monotonic()
        recording, end = started + warmup, started + warmup + seconds
        thread = threading.Thread(target=writer)
        thread.start()
        answered = timed = 0

        def read_answer() -> None:
            nonlocal answered
            line = self.process.stdout.readline()
            if b'"isError":false' not in line:
                raise SystemExit(f"modhost over stdio: a call failed: {line[:300]!r}")
            answered += 1
            slots.release()

        while time.monotonic() <= end:
            read_answer()
            if recording <= time.monotonic() <= end:
                timed += 1
        stop.set()
        slots.release()
        thread.join()
        while answered < len(sent):
            read_answer()
        ticks = cpu_ticks(self.process.pid) - before
        return timed / seconds, ticks / os.sysconf("SC_CLK_TCK") * 1e6 / answered

    def stop(self) -> None:
        if self.process.poll() is None:
            self.process.stdin.close()
            try:
                self.process.wait(10)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait()


#: The most calls `modhost mcp` runs at once for one stdio client.
STDIO_MAX_IN_FLIGHT = 16


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--seconds", type=float, default=2.0, help="timed window of one measurement")
    parser.add_argument("--warmup", type=float, default=0.5, help="unrecorded warm-up before each window")
    parser.add_argument("--clients", default="1,8,32", help="concurrency levels, comma-separated")
    parser.add_argument("--no-list", action="store_true", help="measure tools/call only")
    args = parser.parse_args()
    levels = [int(c) for c in args.clients.split(",")]
    kinds = [CALL] if args.no_list else [CALL, LIST]

    missing = [f"  {path}: {build}" for path, build in BUILDS.items() if not path.is_file()]
    if missing:
        print("missing (build each with CARGO_TARGET_DIR set, see --help):\n" + "\n".join(missing), file=sys.stderr)
        return 2

    env = {"PATH": os.environ.get("PATH", "/usr/bin:/bin")}
    with tempfile.TemporaryDirectory(prefix="modhost-bench-http-") as tmp:
        home, workspace = modhost_home(Path(tmp))
        servers = [
            Server("rmcp", [str(RMCP_ECHO), "--http", "127.0.0.1:0"]),
            Server(
                "modhost (component)",
                [str(MODHOST), "--home", str(home), "--workspace", str(workspace), "mcp", "--http", "127.0.0.1:0"],
            ),
        ]
        stdio = None
        try:
            for index, server in enumerate(servers):
                server.start(env, Path(tmp) / f"server-{index}.stderr")
            stdio = StdioServer(
                [str(MODHOST), "--home", str(home), "--workspace", str(workspace), "mcp"], env,
                Path(tmp) / "stdio.stderr",
            )
            for round_index in range(args.rounds):
                for kind in kinds:
                    for level in levels:
                        shift = (round_index + level) % len(servers)
                        for server in servers[shift:] + servers[:shift]:
                            m = measure(server, kind, level, args.seconds, args.warmup)
                            server.rounds.setdefault((kind, level), []).append(m)
                        if kind == CALL:
                            window = min(level, STDIO_MAX_IN_FLIGHT)
                            measured = stdio.measure(servers[1].tool, window, args.seconds, args.warmup)
                            stdio.rounds.setdefault(level, []).append(measured)
        finally:
            for server in servers:
                server.stop()
            if stdio:
                stdio.stop()

    rmcp, modhost = servers
    print(
        f"MCP streamable HTTP, revision 2026-07-28 (stateless), an echo tool; {args.rounds} alternating"
        f" rounds of {args.warmup:g} s warm-up + {args.seconds:g} s per server, request and level;"
        f" load: mcp_http_load, one keep-alive connection per client; {os.cpu_count()} CPUs"
    )
    failed = 0
    for kind in kinds:
        print(f"\n{TITLES[kind]}")
        for level in levels:
            print(f"  {level} concurrent client{'s' if level > 1 else ''}:")
            for server in servers:
                ms = server.rounds[(kind, level)]
                lost = sum(m.failed for m in ms)
                failed += lost
                note = next((m.first_failure for m in ms if m.first_failure), None)
                print(
                    f"    {server.name:<20} {statistics.median(m.rps for m in ms):7.0f} req/s"
                    f"  p50 {statistics.median(m.p50_ms for m in ms):6.3f} ms"
                    f"  p99 {statistics.median(m.p99_ms for m in ms):6.3f} ms"
                    f"  server CPU {statistics.median(m.cpu_us for m in ms):5.0f} us/req"
                    f"  ({sum(m.calls for m in ms)} timed, {lost} failed)"
                    + (f"  first failure: {note[:200]}" if note else "")
                )
            mine, floor = modhost.rounds[(kind, level)], rmcp.rounds[(kind, level)]
            by_round = [m.rps / f.rps for m, f in zip(mine, floor)]
            of_medians = statistics.median(m.rps for m in mine) / statistics.median(f.rps for f in floor)
            print(
                f"    modhost/rmcp throughput {of_medians:4.2f}x  round ratios median"
                f" {statistics.median(by_round):4.2f}x ({min(by_round):4.2f} to {max(by_round):4.2f})"
                + ("  target >= 0.80x" if kind == CALL else "")
            )
    print(
        "\nthe same tools/call over stdio, modhost only (one client, that many calls in flight, at most"
        f" {STDIO_MAX_IN_FLIGHT}; a Python client, so calls/s is the client's as much as the server's;"
        " the server's CPU per call is what to compare with HTTP's):"
    )
    for level in levels:
        rounds = stdio.rounds[level]
        http_cpu = statistics.median(m.cpu_us for m in modhost.rounds[(CALL, level)])
        stdio_cpu = statistics.median(cpu for _, cpu in rounds)
        print(
            f"  {min(level, STDIO_MAX_IN_FLIGHT):2} in flight: {statistics.median(r for r, _ in rounds):7.0f} calls/s"
            f"  server CPU {stdio_cpu:5.0f} us/call; over HTTP ({level} clients) {http_cpu:5.0f} us/call:"
            f" the transport adds {http_cpu - stdio_cpu:4.0f} us to a call"
        )
    if failed:
        print(f"\n{failed} calls failed: the figures above do not measure what they claim", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
