"""Config hot reload, list_changed notifications and catalog snapshots, end to end.

`wf serve` watches its config file (200 ms polling, 300 ms debounce) and the admin
`reload` tool applies it at once:

- a connected client is told its lists changed: a 2025-11-25 client (mode
  "legacy", after `initialize`) by plain `notifications/tools/list_changed`, a
  2026-07-28 client (mode "auto") on a `subscriptions/listen` stream
  (`Client.listen`), and then lists the new tools;
- an invalid file (a TOML syntax error, or a wrong type) is refused: the running
  sources keep serving and `status.last_reload.error` says `file: key: reason`;
- an unchanged source keeps its instance (the stateful fixture's counter keeps
  counting), a changed one gets a new session (a new process, the counter back at
  zero), a removed one's process ends;
- a source whose config is unchanged since an earlier run serves that run's
  catalog snapshot at once, while its (slow) discovery is still running.
"""

from __future__ import annotations

import contextlib
import time
import uuid
from collections.abc import AsyncIterator, Awaitable, Callable
from pathlib import Path
from typing import Any

import anyio
import mcp_types as types
import pytest
from mcp import Client
from mcp.client.subscriptions import ToolsListChanged

from admin_support import (
    ADMIN_TOKEN_HEADER,
    FX_TOOLS,
    OP_TIMEOUT,
    WATCH_TIMEOUT,
    admin,
    admin_outcome,
    http_client_with_headers,
    source_tools,
    sources_by_name,
    structured,
    tool_names,
    wait_for,
    write_atomic,
)
from conftest import Wf, children_of, proc_info, still_there, toml_config, wait_processes_gone_async

pytestmark = pytest.mark.anyio

HEADER = "# wf config of the reload tests\n"


def fx(fixture_upstream_bin: Path, **extra: Any) -> dict[str, Any]:
    return {"command": str(fixture_upstream_bin), **extra}


# --------------------------------------------------------------------------- 1. list_changed


async def until_listed(
    c: Client, announced: Callable[[float], Awaitable[None]], done: Callable[[set[str]], bool], what: str
) -> set[str]:
    """Waits for a tools-list-changed announcement, then lists the tools; repeats
    (another announcement, another listing) until the listing satisfies `done`.
    Every listing here follows an announcement: the client only lists when told to."""
    deadline = time.monotonic() + WATCH_TIMEOUT
    announcements = 0
    names: set[str] = set()
    while True:
        left = deadline - time.monotonic()
        if left <= 0:
            pytest.fail(
                f"{what}: {announcements} tools/list_changed within {WATCH_TIMEOUT}s; last listing: {sorted(names)}"
            )
        try:
            await announced(left)
        except TimeoutError:
            pytest.fail(
                f"{what}: no tools/list_changed within {WATCH_TIMEOUT}s (after {announcements}); "
                f"listed: {sorted(names)}"
            )
        announcements += 1
        names = await tool_names(c)
        if done(names):
            return names


@contextlib.asynccontextmanager
async def announcing_client(
    wf: Wf, transport: str, mode: str, config: Path
) -> AsyncIterator[tuple[Client, Callable[[float], Awaitable[None]], list[Any]]]:
    """A client of a new `wf serve --config <config>` and an `announced(timeout)` that
    waits for its next tools/list_changed: through `message_handler` for a 2025-11-25
    client, through `Client.listen(tools_list_changed=True)` for a 2026-07-28 one.
    Also yields every notification the message handler saw (legacy only)."""
    notes: list[Any] = []
    seen = 0

    async def handler(message: Any) -> None:
        notes.append(message)

    if transport == "stdio":
        client = wf.stdio_client(mode, "--config", str(config), message_handler=handler)
    else:
        server = wf.start_http("127.0.0.1", None, "--config", str(config))
        client = wf.http_client(server, mode, message_handler=handler)

    async with client as c:
        if mode == "legacy":
            assert c.protocol_version == "2025-11-25", c.protocol_version

            async def announced(timeout: float) -> None:
                nonlocal seen
                with anyio.fail_after(timeout):
                    while True:
                        for i in range(seen, len(notes)):
                            if isinstance(notes[i], types.ToolListChangedNotification):
                                seen = i + 1
                                return
                        seen = len(notes)
                        await anyio.sleep(0.02)

            yield c, announced, notes
        else:
            # mcp 2.3.0 negotiates 2026-07-28 with wf in mode "auto"; such a client has
            # no session to push to and opts in with subscriptions/listen.
            assert c.protocol_version == "2026-07-28", c.protocol_version
            async with c.listen(tools_list_changed=True) as sub:
                assert sub.honored.tools_list_changed is True, sub.honored

                async def announced(timeout: float) -> None:
                    with anyio.fail_after(timeout):
                        async for event in sub:
                            if isinstance(event, ToolsListChanged):
                                return
                        pytest.fail("the subscriptions/listen stream ended")

                yield c, announced, notes


NOTIFY_FRONTS = [("http", "legacy"), ("http", "auto"), ("stdio", "legacy"), ("stdio", "auto")]


@pytest.mark.parametrize(("transport", "mode"), NOTIFY_FRONTS, ids=[f"{t}-{m}" for t, m in NOTIFY_FRONTS])
async def test_config_edit_announces_list_changed_and_lists_new_tools(
    wf: Wf, fixture_upstream_bin: Path, transport: str, mode: str
) -> None:
    config = wf.write_config(HEADER)
    async with announcing_client(wf, transport, mode, config) as (c, announced, notes):
        assert source_tools(await tool_names(c), "fx") == set()

        # An operator adds a source by editing the file; wf's watcher applies it.
        write_atomic(config, HEADER + toml_config({"fx": fx(fixture_upstream_bin)}))
        names = await until_listed(
            c, announced, lambda n: source_tools(n, "fx") == FX_TOOLS, "a source added to the config file"
        )
        # (Admin tools are listed over stdio only: over HTTP this client may not call them.)
        others = {"wf_std__const", "wf_admin__status"} if transport == "stdio" else {"wf_std__const"}
        assert others <= names, "other sources' tools went missing"
        result = await structured(c, "fx__increment")
        assert result == {"count": 1}

        if mode == "legacy":
            # The fixture also brings a prompt and a resource: those lists changed too.
            async def received() -> list[Any]:
                return notes

            await wait_for(
                received,
                lambda ns: any(isinstance(n, types.PromptListChangedNotification) for n in ns)
                and any(isinstance(n, types.ResourceListChangedNotification) for n in ns),
                "prompts/list_changed and resources/list_changed after adding a source with a prompt and a resource",
            )

        # And removing it again is announced as well.
        write_atomic(config, HEADER)
        await until_listed(
            c, announced, lambda n: source_tools(n, "fx") == set(), "a source removed from the config file"
        )


# --------------------------------------------------------------------------- 2. invalid edits


ADMIN_TOKEN_ENV = "E2E_ADMIN_TOKEN"


@contextlib.asynccontextmanager
async def admin_client(wf: Wf, front: str, config: Path, token: str) -> AsyncIterator[Client]:
    """A client allowed to use the admin tools: over stdio (always allowed), or over
    HTTP sending the admin token the config asks for."""
    if front == "stdio":
        async with wf.stdio_client("auto", "--config", str(config)) as c:
            yield c
    else:
        server = wf.start_http("127.0.0.1", None, "--config", str(config), env={ADMIN_TOKEN_ENV: token})
        async with http_client_with_headers(server.url, {ADMIN_TOKEN_HEADER: token}, mode="auto") as c:
            yield c


async def last_reload_where(c: Client, done: Callable[[dict[str, Any]], bool], what: str) -> dict[str, Any]:
    status = await wait_for(
        lambda: admin(c, "status"), lambda s: s["last_reload"] is not None and done(s["last_reload"]), what
    )
    return status["last_reload"]


@pytest.mark.parametrize("front", ["stdio", "http-admin-token"])
async def test_invalid_config_edits_are_refused_and_reported(wf: Wf, fixture_upstream_bin: Path, front: str) -> None:
    token = f"adm-{uuid.uuid4().hex}"
    head = HEADER
    if front != "stdio":
        head += f'[admin]\nover_http = "token"\ntoken = "${{{ADMIN_TOKEN_ENV}}}"\n\n'
    good = head + toml_config({"fx": fx(fixture_upstream_bin)})
    config = wf.write_config(good)
    file = str(config.resolve())

    async with admin_client(wf, front, config, token) as c:
        assert (await structured(c, "fx__increment")) == {"count": 1}
        assert (await admin(c, "status"))["last_reload"] is None

        # 1. A TOML syntax error (the edit also adds a source, which must not appear).
        broken = good + toml_config({"fnew": fx(fixture_upstream_bin)}) + "\n[sources.broken\ncommand = 1\n"
        write_atomic(config, broken)
        last = await last_reload_where(
            c, lambda r: r["error"] is not None, "the watcher's refusal of a file with a syntax error"
        )
        error = last["error"]
        assert error.startswith(f"{file}: <syntax>: "), error
        assert "line" in error and "sources.broken" in error, error
        assert last["sources"] == {"added": [], "changed": [], "removed": [], "unchanged": []}, last
        # The reload tool says the same, as an error.
        failed, outcome = await admin_outcome(c, "reload")
        assert failed, outcome
        assert outcome["error"].startswith(f"{file}: <syntax>: "), outcome
        # The running configuration stays in force: same session, no new source.
        assert (await structured(c, "fx__increment")) == {"count": 2}
        assert source_tools(await tool_names(c), "fnew") == set()
        assert set(await sources_by_name(c)) == {"fx", "wf.std"}

        # 2. A semantic error: a value of the wrong type.
        write_atomic(
            config,
            good.replace('[sources."fx"]\n', '[sources."fx"]\nenabled = "yes"\n')
            + toml_config({"fnew": fx(fixture_upstream_bin)}),
        )
        last = await last_reload_where(
            c,
            lambda r: r["error"] is not None and "enabled" in r["error"],
            "the watcher's refusal of `enabled = \"yes\"`",
        )
        error = last["error"]
        assert error.startswith(f"{file}: sources.fx.enabled: "), error
        assert "expected a boolean" in error, error
        assert (await structured(c, "fx__increment")) == {"count": 3}
        assert source_tools(await tool_names(c), "fnew") == set()
        rows = await sources_by_name(c)
        assert rows["fx"]["state"] == "ready" and rows["fx"]["enabled"] is True, rows["fx"]

        # 3. The operator fixes the file: it applies, and fx kept its session throughout.
        write_atomic(config, good + toml_config({"fnew": fx(fixture_upstream_bin)}))
        last = await last_reload_where(
            c, lambda r: r["error"] is None and "fnew" in r["sources"]["added"], "the fixed file's reload"
        )
        assert "fx" in last["sources"]["unchanged"], last
        names = await wait_for(
            lambda: tool_names(c), lambda n: source_tools(n, "fnew") == FX_TOOLS, "the fixed file's new source"
        )
        assert source_tools(names, "fx") == FX_TOOLS
        assert (await structured(c, "fx__increment")) == {"count": 4}


# --------------------------------------------------------------------------- 3. sessions across reloads


async def fx_pid(c: Client, source: str) -> int:
    return int((await structured(c, f"{source}__pid"))["pid"])


async def test_reload_keeps_unchanged_sessions_replaces_changed_and_ends_removed(
    wf: Wf, fixture_upstream_bin: Path
) -> None:
    config = wf.write_config(HEADER + toml_config({"fx": fx(fixture_upstream_bin), "gone": fx(fixture_upstream_bin)}))
    async with wf.stdio_client("auto", "--config", str(config)) as c:
        assert [(await structured(c, "fx__increment"))["count"] for _ in range(2)] == [1, 2]
        fx_before = proc_info(await fx_pid(c, "fx"))
        gone = proc_info(await fx_pid(c, "gone"))
        assert fx_before is not None and gone is not None
        wf_pid = fx_before.ppid
        assert gone.ppid == wf_pid, "both upstreams are children of wf"
        epoch = (await sources_by_name(c))["fx"]["session_epoch"]
        assert epoch == 1, epoch

        # Add fy, remove gone, leave fx as it is; apply at once with the reload tool.
        write_atomic(config, HEADER + toml_config({"fx": fx(fixture_upstream_bin), "fy": fx(fixture_upstream_bin)}))
        outcome = await admin(c, "reload")
        assert outcome["error"] is None, outcome
        report = outcome["sources"]
        assert "fx" in report["unchanged"], report
        if report["added"] or report["removed"]:  # (else wf's file watcher applied the file first)
            assert report["added"] == ["fy"] and report["removed"] == ["gone"] and report["changed"] == [], report

        # fx: the same instance, process and upstream session; its counter goes on.
        assert (await structured(c, "fx__increment")) == {"count": 3}
        assert await fx_pid(c, "fx") == fx_before.pid
        assert still_there(fx_before) is not None
        assert (await sources_by_name(c))["fx"]["session_epoch"] == epoch
        # gone: its process ended and was reaped (no zombie left under wf).
        left = await wait_processes_gone_async([gone], timeout=5.0)
        assert not left, f"the removed source's upstream is still there: {left}"
        assert gone.pid not in {p.pid for p in children_of(wf_pid)}
        names = await tool_names(c)
        assert source_tools(names, "gone") == set() and source_tools(names, "fy") == FX_TOOLS
        assert (await structured(c, "fy__increment")) == {"count": 1}

        # Change fx (one env var more): a new instance with a new session and process.
        write_atomic(
            config,
            HEADER
            + toml_config({"fx": fx(fixture_upstream_bin, env={"E2E_MARK": "1"}), "fy": fx(fixture_upstream_bin)}),
        )
        outcome = await admin(c, "reload")
        assert outcome["error"] is None, outcome
        assert "fy" in outcome["sources"]["unchanged"], outcome
        if outcome["sources"]["changed"]:
            assert outcome["sources"]["changed"] == ["fx"], outcome
        assert (await structured(c, "fx__increment")) == {"count": 1}, "a changed source kept its old session"
        fx_after = await fx_pid(c, "fx")
        assert fx_after != fx_before.pid
        left = await wait_processes_gone_async([fx_before], timeout=5.0)
        assert not left, f"the changed source's old upstream is still there: {left}"
        row = (await sources_by_name(c))["fx"]
        assert row["runtime"]["upstream"]["env_keys"] == ["E2E_MARK"], row
        # fy was not touched by that reload.
        assert (await structured(c, "fy__increment")) == {"count": 2}


# --------------------------------------------------------------------------- 4. catalog snapshots

def write_script(path: Path, body: str) -> None:
    write_atomic(path, f"#!/bin/sh\n{body}\n")
    path.chmod(0o755)


async def test_snapshot_serves_tools_while_a_slow_upstream_is_discovered(wf: Wf, fixture_upstream_bin: Path) -> None:
    """The source's command is a script: between runs its *contents* change (now it
    waits at a gate, a file the test creates, before it starts the server), while the
    config table — the source's fingerprint — stays the same, so the second run may
    serve the first run's snapshot while the upstream cannot answer."""
    script = wf.root / "upstream.sh"
    gate = wf.root / "gate"
    write_script(script, f'exec "{fixture_upstream_bin}" "$@"')
    table = {"slow": {"command": str(script)}}
    config = wf.write_config(HEADER + toml_config(table))

    # Run 1: discovery saves the catalog in the state dir.
    run1_started = time.time()
    async with wf.stdio_client("auto", "--config", str(config)) as c:
        row = await wait_for(
            lambda: sources_by_name(c), lambda r: r["slow"]["state"] == "ready", "first discovery"
        )
        assert row["slow"]["catalog_from_snapshot"] is False, row["slow"]
        assert source_tools(await tool_names(c), "slow") == FX_TOOLS
    discovered_by = time.time()  # run 1's discovery ended before this
    assert (wf.state_dir / "wf.db").exists()

    # Run 2: the upstream now cannot answer until the test opens the gate.
    write_script(script, f'while [ ! -e "{gate}" ]; do sleep 0.05; done\nexec "{fixture_upstream_bin}" "$@"')
    async with wf.stdio_client("auto", "--config", str(config)) as c:
        names = await tool_names(c)
        assert source_tools(names, "slow") == FX_TOOLS, sorted(names)
        listed_at = time.time()

        row = (await sources_by_name(c))["slow"]
        asked_at = time.time()
        assert row["catalog_from_snapshot"] is True, row
        assert row["state"] == "pending" and row["discovery_ms"] is None, row
        # The age of run 1's catalog: at least the time since run 1 ended, at most
        # the time since run 1 started.
        oldest = int((listed_at - discovered_by) * 1000) - 1
        youngest = int((asked_at - run1_started) * 1000) + 1
        assert isinstance(row["catalog_age_ms"], int) and oldest <= row["catalog_age_ms"] <= youngest, (oldest, youngest, row)
        assert row["capabilities"]["tools"] == len(FX_TOOLS), row

        # The snapshot's tools route to the real upstream once it is up: a call made
        # while it is held at the gate is answered when the gate opens.
        echoed: list[Any] = []

        async def echo() -> None:
            echoed.append(await c.call_tool("slow__echo", {"message": "from the snapshot"}))

        with anyio.fail_after(OP_TIMEOUT * 2):
            async with anyio.create_task_group() as tg:
                tg.start_soon(echo)
                assert (await sources_by_name(c))["slow"]["state"] == "pending"
                opened_at = time.time()
                gate.touch()
        assert not echoed[0].is_error and echoed[0].content[0].text == "from the snapshot"

        # Discovery finishes and replaces the snapshot; it lasted at least until the gate opened.
        row = await wait_for(
            lambda: sources_by_name(c),
            lambda r: r["slow"]["catalog_from_snapshot"] is False,
            "discovery of the slow upstream",
            timeout=OP_TIMEOUT,
        )
        row = row["slow"]
        assert row["state"] == "ready" and row["discovery_ms"] >= int((opened_at - listed_at) * 1000) - 1, row
        assert source_tools(await tool_names(c), "slow") == FX_TOOLS

    # Run 3, control: a different table (one more argument, which the fixture ignores)
    # is a different fingerprint, so no snapshot: the list waits out the startup grace
    # and has none of the source's tools (the gate is closed again: the upstream never answers).
    gate.unlink()
    other = wf.write_config(
        HEADER
        + toml_config({"slow": {"command": str(script), "args": ["--unused"]}}, server={"startup_grace_ms": 500}),
        name="other.toml",
    )
    async with wf.stdio_client("auto", "--config", str(other)) as c:
        assert source_tools(await tool_names(c), "slow") == set()
        row = (await sources_by_name(c))["slow"]
        assert row["catalog_from_snapshot"] is False and row["state"] == "pending", row
