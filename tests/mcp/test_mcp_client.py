#!/usr/bin/env python3
"""Drive `modhost mcp` with the real Python MCP client (the `mcp` package, 1.x).

Covers initialize, tools/list, tools/call (files.list on a temp workspace),
an input that violates the schema (-> isError), a cancel of a call that never
answers (the module process must be gone afterwards), and stdin EOF while a
call runs (the server exits promptly, no module process left behind). The
server starts each tool's next process ahead of its call; those must be gone
too once the client has closed the session.

Paths come from the environment; each defaults to $CARGO_TARGET_DIR/debug/<name>:

    MODHOST_BIN   the modhost binary
    FILES_BIN     the `files` module binary
    HANG_BIN      the `fixture_hang` test fixture (a module that never answers)

Exits 0 when every check passes, 1 otherwise (each failure is printed).
Requires: the venv tests/mcp/setup-clients makes (tests/mcp/.venv-mcp1).
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from datetime import timedelta
from pathlib import Path

import anyio
from mcp import ClientSession, StdioServerParameters, types
from mcp.client.stdio import stdio_client

TARGET = Path(os.environ.get("CARGO_TARGET_DIR", "target")) / "debug"
MODHOST = Path(os.environ.get("MODHOST_BIN", TARGET / "modhost"))
FILES = Path(os.environ.get("FILES_BIN", TARGET / "files"))
HANG = Path(os.environ.get("HANG_BIN", TARGET / "fixture_hang"))

# Generous: the suite runs on small, loaded machines. A healthy run takes
# well under a second per step; these only bound a hung one.
STEP_TIMEOUT = 60.0
PROCESS_TIMEOUT = 30.0

failures: list[str] = []


def check(condition: bool, what: str) -> None:
    print(("ok    " if condition else "FAIL  ") + what, flush=True)
    if not condition:
        failures.append(what)


def make_home(root: Path) -> tuple[Path, Path]:
    """A host home with `files` and `hang` installed and pinned, and a workspace."""
    home, workspace = root / "home", root / "workspace"
    workspace.mkdir()
    for module_id, binary in (("files", FILES), ("hang", HANG)):
        folder = home / "modules" / module_id
        folder.mkdir(parents=True)
        shutil.copy2(binary, folder / module_id)
        # Only pinned modules become tools: approve them as an operator would.
        pinned = subprocess.run(
            [str(MODHOST), "--home", str(home), "--workspace", str(workspace), "pin", module_id],
            stdin=subprocess.DEVNULL,
            capture_output=True,
            timeout=STEP_TIMEOUT,
        )
        if pinned.returncode != 0:
            raise SystemExit(f"modhost pin {module_id} failed: {pinned.stderr.decode(errors='replace')}")
    (workspace / "notes.txt").write_text("hello\n")
    (workspace / "src").mkdir()
    (workspace / "src" / "main.rs").write_text("fn main() {}\n")
    return home, workspace


def processes_running(path: Path) -> list[int]:
    """Pids whose command line starts with `path` (the installed module copy)
    or with its approved snapshot, `<home>/cache/snapshots/<digest>/<name>`,
    which is what a pinned module runs."""
    wanted = str(path).encode()
    snapshots = str(path.parents[2] / "cache" / "snapshots").encode() + b"/"
    name = b"/" + path.name.encode()
    pids = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            cmdline = (entry / "cmdline").read_bytes()
            status = (entry / "status").read_text()
        except OSError:
            continue
        # A zombie has been killed already; only its parent's reaping is left.
        argv0 = cmdline.split(b"\0", 1)[0]
        from_snapshot = argv0.startswith(snapshots) and argv0.endswith(name)
        if (argv0 == wanted or from_snapshot) and "State:\tZ" not in status:
            pids.append(int(entry.name))
    return pids


def kill_leftovers(path: Path) -> None:
    """Whatever a failed check left running, so the script never leaks a process."""
    for pid in processes_running(path):
        try:
            os.kill(pid, 9)
        except OSError:
            pass


def wait_until(predicate, timeout: float) -> bool:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if predicate():
            return True
        time.sleep(0.02)
    return predicate()


def text_of(result: types.CallToolResult) -> str:
    return "\n".join(c.text for c in result.content if isinstance(c, types.TextContent))


async def session_checks(home: Path, workspace: Path) -> None:
    hang_path = home / "modules" / "hang" / "hang"
    params = StdioServerParameters(
        command=str(MODHOST),
        args=["--home", str(home), "--workspace", str(workspace), "mcp"],
        env={"PATH": os.environ.get("PATH", "/usr/bin:/bin")},
    )
    async with stdio_client(params) as (read, write):
        async with ClientSession(read, write, read_timeout_seconds=timedelta(seconds=STEP_TIMEOUT)) as session:
            init = await session.initialize()
            check(init.protocolVersion in ("2025-06-18", "2025-11-25"), f"initialize negotiated {init.protocolVersion}")
            check(init.serverInfo.name == "modhost", "serverInfo names modhost")
            check(init.capabilities.tools is not None, "server declares the tools capability")

            await session.send_ping()
            check(True, "ping answered")

            listed = await session.list_tools()
            tools = {t.name: t for t in listed.tools}
            for name in ("files__files_list", "files__files_search", "hang__hang_run"):
                check(name in tools, f"tools/list offers {name}")
            check("modhost__knowledge" not in tools, "no module ships knowledge: no knowledge tool")
            files_list = tools.get("files__files_list")
            if files_list is not None:
                check(files_list.annotations is not None and files_list.annotations.readOnlyHint is True,
                      "files__files_list is annotated read-only")
                check(files_list.inputSchema.get("type") == "object", "inputSchema is the module's object schema")
                check("Effects:" in (files_list.description or ""), "description states the effects")

            result = await session.call_tool("files__files_list", {})
            check(not result.isError, "files__files_list succeeds")
            structured = result.structuredContent or {}
            paths = sorted(e.get("path") for e in structured.get("entries", []))
            check("notes.txt" in paths, f"structuredContent lists the workspace ({paths})")
            check("notes.txt" in text_of(result), "the text copy carries the output too")
            files_path = home / "modules" / "files" / "files"
            check(
                wait_until(lambda: len(processes_running(files_path)) > 0, PROCESS_TIMEOUT),
                "the next files__files_list process is started ahead of its call",
            )
            again = await session.call_tool("files__files_list", {})
            check(again.structuredContent == result.structuredContent, "a warm process answers the same")

            bad = await session.call_tool("files__files_list", {"no_such_argument": 1})
            check(bad.isError is True, "schema-violating input comes back with isError")
            check("no_such_argument" in text_of(bad), "the error names the problem")


            # Cancel: start a call that never answers, wait for its process,
            # send notifications/cancelled, and the process must go away.
            request_id = getattr(session, "_request_id", None)
            check(isinstance(request_id, int), "the client's next request id is known")
            async with anyio.create_task_group() as tg:
                async def slow_call() -> None:
                    await session.call_tool("hang__hang_run", {})

                tg.start_soon(slow_call)
                started = await anyio.to_thread.run_sync(
                    lambda: wait_until(lambda: processes_running(hang_path), PROCESS_TIMEOUT)
                )
                check(started, "the slow call's module process is running")
                await session.send_notification(
                    types.ClientNotification(
                        types.CancelledNotification(
                            params=types.CancelledNotificationParams(requestId=request_id, reason="test cancel")
                        )
                    )
                )
                gone = await anyio.to_thread.run_sync(
                    lambda: wait_until(lambda: not processes_running(hang_path), PROCESS_TIMEOUT)
                )
                check(gone, "notifications/cancelled killed the module process")
                tg.cancel_scope.cancel()

            await session.send_ping()
            check(True, "the server keeps serving after a cancel")


def eof_check(home: Path, workspace: Path) -> None:
    """Close stdin while a call runs: the server must exit promptly and leave no module behind."""
    hang_path = home / "modules" / "hang" / "hang"
    server = subprocess.Popen(
        [str(MODHOST), "--home", str(home), "--workspace", str(workspace), "mcp"],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
    )
    assert server.stdin is not None and server.stdout is not None
    lines = [
        {"jsonrpc": "2.0", "id": 1, "method": "initialize",
         "params": {"protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "eof", "version": "0"}}},
        {"jsonrpc": "2.0", "method": "notifications/initialized"},
        {"jsonrpc": "2.0", "id": 2, "method": "tools/call", "params": {"name": "hang__hang_run", "arguments": {}}},
    ]
    for line in lines:
        server.stdin.write((json.dumps(line) + "\n").encode())
    server.stdin.flush()
    server.stdout.readline()  # the initialize answer
    try:
        check(wait_until(lambda: processes_running(hang_path), PROCESS_TIMEOUT), "EOF test: the call is running")
        started = time.monotonic()
        server.stdin.close()
        try:
            code = server.wait(timeout=PROCESS_TIMEOUT)
        except subprocess.TimeoutExpired:
            code = None
        check(code == 0, f"stdin EOF ends the server (exit {code}, {time.monotonic() - started:.2f}s)")
        check(
            wait_until(lambda: not processes_running(hang_path), PROCESS_TIMEOUT),
            "no module process outlives the server",
        )
    finally:
        if server.poll() is None:
            server.kill()
            server.wait()
        kill_leftovers(hang_path)


def main() -> int:
    for name, path in (("MODHOST_BIN", MODHOST), ("FILES_BIN", FILES), ("HANG_BIN", HANG)):
        if not path.is_file():
            print(f"error: {name}: {path} does not exist; build it first (cargo build --workspace --bins)")
            return 2
    with tempfile.TemporaryDirectory(prefix="modhost-mcp-") as tmp:
        home, workspace = make_home(Path(tmp))
        hang_path = home / "modules" / "hang" / "hang"
        files_path = home / "modules" / "files" / "files"
        try:
            anyio.run(session_checks, home, workspace)
            check(
                wait_until(lambda: not processes_running(files_path), PROCESS_TIMEOUT),
                "no process started ahead outlives the server",
            )
        finally:
            kill_leftovers(hang_path)
            kill_leftovers(files_path)
        eof_check(home, workspace)
    if failures:
        print(f"\n{len(failures)} check(s) failed:")
        for f in failures:
            print(f"  - {f}")
        return 1
    print("\nall MCP client checks passed")
    return 0


if __name__ == "__main__":
    sys.exit(main())
