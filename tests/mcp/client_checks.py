#!/usr/bin/env python3
"""Drive `modhost mcp` with the real Python MCP client, 1.x or 2.x (whichever
`mcp` this interpreter has), as tests/it/mcp_clients.rs runs it from the venvs
tests/mcp/setup-clients makes; with `--http URL`, over streamable HTTP against
a `modhost mcp --http` already serving the same home at URL, as
tests/it/mcp_http_clients.rs runs it.

Checks, each printed as `ok` or `FAIL`:

- the handshake (`initialize`) in the legacy era; with mcp 2.x also
  `server/discover` (mode "auto"), which must reach the 2026-07-28 revision;
- tools/list, a call, an error call (schema violation -> isError);
- progress (the `slow` module reports two steps; the client asked for them);
- cancellation (a call of `hang` is cancelled; its process must go away);
- roots (stdio only): the client offers a root holding a file the server's
  `--workspace` lacks; files.search must find it there. Over HTTP the
  client's roots name folders of the client's machine, never the server's
  workspace, so this check does not apply there;
- an elicited approval: `net.fetch` declares `network: true`, so its
  verdict is `ask`; the client answers the elicitation: approve -> it ran,
  decline -> it did not. When ASK_EXECUTIONS names the file the ask module
  appends a line to each time it starts, the approved call ran exactly once
  and the declined one not at all (the module's own count, not its answer);
- list_changed: `modhost disable files` in another process must bring
  `notifications/tools/list_changed` (handshake era; over HTTP on the
  session's GET stream), or a `subscriptions/listen` notification
  (2026-07-28), and the next list lacks files' tools.

The home is prepared by the Rust test; paths come from the environment:
MODHOST_BIN, MODHOST_HOME, MODHOST_TEST_WORKSPACE (the server's
--workspace), MODHOST_TEST_ROOT (the root the client offers), HANG_INSTALLED
(the installed `hang` module, to find its process); optionally ASK_TOOL (the
ask tool's name, default net__net_fetch) and ASK_EXECUTIONS.

Exits 0 when every check passes, 1 otherwise (each failure is printed).
"""

from __future__ import annotations

import importlib.metadata
import os
import subprocess
import sys
import time
from datetime import timedelta
from pathlib import Path
from typing import Any

import anyio
from mcp import StdioServerParameters

try:  # mcp 2.x keeps its types in their own package
    import mcp_types as types
except ImportError:  # mcp 1.x
    from mcp import types

MCP_VERSION = importlib.metadata.version("mcp")
MAJOR = int(MCP_VERSION.split(".")[0])
MODHOST = os.environ["MODHOST_BIN"]
HOME = Path(os.environ["MODHOST_HOME"])
WORKSPACE = Path(os.environ["MODHOST_TEST_WORKSPACE"])
ROOT = Path(os.environ["MODHOST_TEST_ROOT"])
HANG = Path(os.environ["HANG_INSTALLED"])
ROOT_MARKER = "rootonly-7f3a"
ASK_TOOL = os.environ.get("ASK_TOOL", "net__net_fetch")
ASK_EXECUTIONS = Path(os.environ["ASK_EXECUTIONS"]) if os.environ.get("ASK_EXECUTIONS") else None
# `--http URL`: a `modhost mcp --http` serving the same home; None: start
# `modhost mcp` on stdio.
HTTP_URL = sys.argv[sys.argv.index("--http") + 1] if "--http" in sys.argv else None
TRANSPORT = f"http {HTTP_URL}" if HTTP_URL else "stdio"

STEP_TIMEOUT = 60.0
TOLD_WITHIN = 20.0
HANDSHAKE_REVISIONS = ("2024-11-05", "2025-03-26", "2025-06-18", "2025-11-25")

failures: list[str] = []


def check(condition: bool, what: str) -> None:
    print(("ok    " if condition else "FAIL  ") + f"[mcp {MCP_VERSION}, {'http' if HTTP_URL else 'stdio'}] {what}", flush=True)
    if not condition:
        failures.append(what)


def plain(model: Any) -> dict:
    """A result as the wire shows it (camelCase keys) in both majors."""
    return model.model_dump(by_alias=True, exclude_none=True, mode="json")


def text_of(result: dict) -> str:
    return "\n".join(c.get("text", "") for c in result.get("content", []))


def modhost(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        [MODHOST, "--home", str(HOME), "--workspace", str(WORKSPACE), *args],
        stdin=subprocess.DEVNULL,
        capture_output=True,
        timeout=STEP_TIMEOUT,
    )


def processes_running(path: Path) -> list[int]:
    """Pids running the installed module `path` or its approved snapshot."""
    snapshots = str(path.parents[2] / "cache" / "snapshots").encode() + b"/"
    wanted, name = str(path).encode(), b"/" + path.name.encode()
    pids = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            argv0 = (entry / "cmdline").read_bytes().split(b"\0", 1)[0]
            status = (entry / "status").read_text()
        except OSError:
            continue
        if (argv0 == wanted or (argv0.startswith(snapshots) and argv0.endswith(name))) and "State:\tZ" not in status:
            pids.append(int(entry.name))
    return pids


def ask_executions() -> int | None:
    """How many times the ask module started, when the test counts them."""
    if ASK_EXECUTIONS is None:
        return None
    try:
        return len(ASK_EXECUTIONS.read_text().splitlines())
    except FileNotFoundError:
        return 0


async def wait_until(predicate, timeout: float) -> bool:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if predicate():
            return True
        await anyio.sleep(0.05)
    return predicate()


class Observed:
    """What the server sent the client on its own: notifications, questions."""

    def __init__(self) -> None:
        self.methods: list[str] = []
        self.elicitations: list[dict] = []
        self.answer = "accept"

    async def message_handler(self, message: Any) -> None:
        inner = getattr(message, "root", message)
        method = getattr(inner, "method", None)
        if method:
            self.methods.append(method)

    async def list_roots(self, context: Any) -> Any:
        return types.ListRootsResult(roots=[types.Root(uri=ROOT.as_uri(), name="client root")])

    async def elicitation(self, context: Any, params: Any) -> Any:
        asked = plain(params)
        self.elicitations.append(asked)
        if self.answer != "accept":
            return types.ElicitResult(action=self.answer)
        return types.ElicitResult(action="accept", content=approving_content(asked.get("requestedSchema", {})))


def approving_content(schema: dict) -> dict:
    """What a user who approves fills in: true for a flag, the approving
    choice of an enum, for every property the form asks."""
    content: dict = {}
    for key, prop in (schema.get("properties") or {}).items():
        kind = prop.get("type")
        choices = prop.get("enum") or [o.get("const") for o in prop.get("oneOf", []) if "const" in o]
        if choices:
            approving = [c for c in choices if any(w in str(c).lower() for w in ("once", "approve", "allow", "yes"))]
            content[key] = (approving or choices)[0]
        elif kind == "boolean":
            content[key] = True
        elif kind in ("number", "integer"):
            content[key] = 1
        else:
            content[key] = "yes"
    return content


class Driver:
    """The few calls the checks need, over either major's API."""

    def __init__(self, session: Any, client: Any = None) -> None:
        self.session, self.client = session, client

    async def list_names(self) -> list[str]:
        listed = await (self.client or self.session).list_tools()
        return [t.name for t in listed.tools]

    async def call(self, name: str, arguments: dict, progress=None) -> dict:
        """The result; a JSON-RPC error comes back as an isError result, so
        one refused call does not end the other checks."""
        target = self.client or self.session
        try:
            return plain(await target.call_tool(name, arguments, progress_callback=progress))
        except Exception as e:  # the client raises its own error type per major
            return {"isError": True, "rpcError": True, "content": [{"type": "text", "text": f"{type(e).__name__}: {e}"}]}


async def checks(driver: Driver, observed: Observed, *, roots: bool, list_changed: bool) -> None:
    names = await driver.list_names()
    for name in ("files__files_search", "files__files_list", "hang__hang_run", "slow__slow_count"):
        check(name in names, f"tools/list offers {name}")
    check("modhost__knowledge" not in names, "no module ships knowledge, so modhost__knowledge is not offered")
    check(ASK_TOOL in names, f"tools/list offers the ask tool {ASK_TOOL} to a client that can be asked")

    found = await driver.call("files__files_list", {})
    check(not found.get("isError"), f"a call succeeds: {text_of(found)[:200]}")

    bad = await driver.call("files__files_list", {"no_such_argument": 1})
    check(bad.get("isError") is True and "no_such_argument" in text_of(bad), "a schema-violating call is an isError result naming the problem")

    reports: list[tuple[float, Any]] = []

    async def on_progress(progress: float, total: Any, message: Any = None) -> None:
        reports.append((progress, total))

    counted = await driver.call("slow__slow_count", {}, progress=on_progress)
    check(not counted.get("isError"), "the progress-reporting call succeeds")
    await wait_until(lambda: len(reports) >= 2, 5)
    check((1, 2) in reports and (2, 2) in reports, f"progress reached the client ({reports})")

    if roots:
        hits = ""
        deadline = time.monotonic() + 20
        while time.monotonic() < deadline:
            result = await driver.call("files__files_search", {"pattern": ROOT_MARKER})
            hits = text_of(result)
            if "only-in-root.txt" in hits:
                break
            await anyio.sleep(0.2)
        check("only-in-root.txt" in hits, f"the client's root is the workspace: files.search finds a file only there ({hits[:200]})")

    observed.answer = "accept"
    before = ask_executions()
    approved = await driver.call(ASK_TOOL, {})
    check(len(observed.elicitations) == 1, f"calling an ask tool elicits the user once ({len(observed.elicitations)})")
    check(not approved.get("isError") and approved.get("structuredContent", {}).get("ran") is True, f"approved, the ask tool ran ({text_of(approved)[:200]})")
    if before is not None:
        check(ask_executions() == before + 1, f"approved, the ask module started exactly once ({before} -> {ask_executions()})")
    observed.answer = "decline"
    declined = await driver.call(ASK_TOOL, {})
    check(len(observed.elicitations) == 2, "each call asks again (approve once)")
    check(declined.get("isError") is True and "ran" not in (declined.get("structuredContent") or {}), f"declined, the ask tool did not run ({text_of(declined)[:200]})")
    if before is not None:
        await anyio.sleep(0.5)  # a start the refusal raced would show by now
        check(ask_executions() == before + 1, f"declined, the ask module never started ({before + 1} -> {ask_executions()})")

    await cancellation(driver)

    if list_changed:
        observed.methods.clear()
        disabled = modhost("disable", "files")
        check(disabled.returncode == 0, f"modhost disable files in another process ({disabled.stderr.decode(errors='replace')[:200]})")
        told = await wait_until(lambda: "notifications/tools/list_changed" in observed.methods, TOLD_WITHIN)
        check(told, f"notifications/tools/list_changed after modhost disable ({observed.methods})")
        names = await driver.list_names()
        check(not any(n.startswith("files__") for n in names), f"the next tools/list lacks the disabled module's tools ({names})")
        refused = await driver.call("files__files_list", {})
        check(refused.get("isError") is True and "modhost enable files" in text_of(refused), f"a call of a disabled tool is refused with the reason ({text_of(refused)[:200]})")
        modhost("enable", "files")


async def cancellation(driver: Driver) -> None:
    """Cancel a call that never answers: its module process must go away."""
    async with anyio.create_task_group() as tg:
        if MAJOR >= 2:
            # 2.x: cancelling the awaiting task is the API; the client tells the server.
            scope = anyio.CancelScope()

            async def slow_call() -> None:
                with scope:
                    await driver.call("hang__hang_run", {})

            tg.start_soon(slow_call)
            check(await wait_until(lambda: processes_running(HANG), STEP_TIMEOUT), "the slow call's module process is running")
            scope.cancel()
        else:
            request_id = getattr(driver.session, "_request_id", None)

            async def slow_call() -> None:
                await driver.call("hang__hang_run", {})

            tg.start_soon(slow_call)
            check(await wait_until(lambda: processes_running(HANG), STEP_TIMEOUT), "the slow call's module process is running")
            await driver.session.send_notification(
                types.ClientNotification(
                    types.CancelledNotification(
                        params=types.CancelledNotificationParams(requestId=request_id, reason="test cancel")
                    )
                )
            )
        gone = await wait_until(lambda: not processes_running(HANG), STEP_TIMEOUT)
        check(gone, "cancelling the call killed the module process")
        tg.cancel_scope.cancel()


def server() -> Any:
    """What the client connects to: the HTTP endpoint, or `modhost mcp`
    started on stdio."""
    if HTTP_URL:
        return HTTP_URL
    return StdioServerParameters(
        command=MODHOST,
        args=["--home", str(HOME), "--workspace", str(WORKSPACE), "mcp"],
        env={"PATH": os.environ.get("PATH", "/usr/bin:/bin")},
    )


async def legacy_session() -> None:
    """The initialize handshake, every check."""
    observed = Observed()
    if MAJOR >= 2:
        from mcp import Client

        async with Client(
            server(),
            mode="legacy",
            read_timeout_seconds=STEP_TIMEOUT,
            list_roots_callback=observed.list_roots,
            elicitation_callback=observed.elicitation,
            message_handler=observed.message_handler,
        ) as client:
            version = client.protocol_version
            check(version in HANDSHAKE_REVISIONS, f"initialize negotiated {version}")
            tools = client.server_capabilities.tools
            check(bool(tools and tools.list_changed), "the server declares tools.listChanged")
            await checks(Driver(client.session, client), observed, roots=not HTTP_URL, list_changed=True)
        return
    from mcp import ClientSession
    from mcp.client.stdio import stdio_client
    from mcp.client.streamable_http import streamable_http_client

    transport = streamable_http_client(HTTP_URL) if HTTP_URL else stdio_client(server())
    async with transport as (read, write, *_session_id):
        async with ClientSession(
            read,
            write,
            read_timeout_seconds=timedelta(seconds=STEP_TIMEOUT),
            list_roots_callback=observed.list_roots,
            elicitation_callback=observed.elicitation,
            message_handler=observed.message_handler,
        ) as session:
            init = await session.initialize()
            check(init.protocolVersion in HANDSHAKE_REVISIONS, f"initialize negotiated {init.protocolVersion}")
            check(bool(init.capabilities.tools and init.capabilities.tools.listChanged), "the server declares tools.listChanged")
            await checks(Driver(session), observed, roots=not HTTP_URL, list_changed=True)


async def discover_session() -> None:
    """mcp 2.x's default: `server/discover`, which must reach 2026-07-28.
    Roots and list_changed are the handshake era's; the call checks run."""
    from mcp import Client

    observed = Observed()
    async with Client(
        server(),
        read_timeout_seconds=STEP_TIMEOUT,
        list_roots_callback=observed.list_roots,
        elicitation_callback=observed.elicitation,
        message_handler=observed.message_handler,
    ) as client:
        version = client.protocol_version
        check(version == "2026-07-28", f"server/discover reached 2026-07-28 (got {version})")
        await checks(Driver(client.session, client), observed, roots=False, list_changed=False)
        await modern_list_changed(client)


async def modern_list_changed(client: Any) -> None:
    """2026-07-28's own mechanism: a `subscriptions/listen` stream carries
    the tools-list change after `modhost disable` in another process."""
    try:
        async with client.listen(tools_list_changed=True) as subscription:
            disabled = modhost("disable", "files")
            check(disabled.returncode == 0, "modhost disable files in another process")
            told = False
            with anyio.move_on_after(TOLD_WITHIN):
                async for _event in subscription:
                    told = True
                    break
            check(told, "subscriptions/listen carries the tools-list change after modhost disable")
    except Exception as e:  # not offered: a failed check, not a crash
        check(False, f"subscriptions/listen for tools-list changes ({type(e).__name__}: {e})")
    finally:
        modhost("enable", "files")
    names = [t.name for t in (await client.list_tools()).tools]
    check("files__files_search" in names, "after modhost enable the files tools are back")


def main() -> int:
    print(f"python mcp {MCP_VERSION} over {TRANSPORT}", flush=True)
    try:
        anyio.run(legacy_session)
        if MAJOR >= 2:
            anyio.run(discover_session)
    except Exception as e:  # a crash is a failed check, with its story
        import traceback

        traceback.print_exc()
        check(False, f"the session ended with {type(e).__name__}: {e}")
    finally:
        for pid in processes_running(HANG):
            try:
                os.kill(pid, 9)
            except OSError:
                pass
    if failures:
        print(f"\n{len(failures)} check(s) failed:")
        for f in failures:
            print(f"  - {f}")
        return 1
    print("\nall MCP client checks passed")
    return 0


if __name__ == "__main__":
    sys.exit(main())
