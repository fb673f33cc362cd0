"""The configured timeouts are the ones wf applies:

- `server.discovery_timeout_ms`: a source whose discovery does not finish in
  time is reported with that bound;
- an mcp source's `connect_timeout_ms`: an upstream that does not complete its
  handshake in time fails with that bound;
- an mcp source's `call_timeout_ms`: a call running longer fails (well before
  the upstream would answer);
- `server.live_list_timeout_ms`: a prompts listing waits that long for the
  source's live session — longer than the 5 s default when configured so, and
  no longer than configured when the session is slower.

The stalled upstreams here would answer after ten minutes, far beyond every
bound tested and every default; the live listings answer after 3 s and 8 s, on
either side of the 5 s default. So each outcome can only come from the
configured value.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import anyio
import pytest

from admin_support import admin, wait_for
from conftest import UpstreamEvents, Wf, call_outcome, toml_config
from promise_support import OP_TIMEOUT, PY_SERVER, PY_START_TIMEOUT, py_upstream

pytestmark = pytest.mark.anyio

STALL_MS = 600_000


async def source_row(c: Any, name: str) -> dict[str, Any]:
    rows = {r["name"]: r for r in (await admin(c, "list_sources"))["sources"]}
    return rows[name]


async def prompt_names(c: Any) -> set[str]:
    with anyio.fail_after(OP_TIMEOUT):
        return {p.name for p in (await c.list_prompts()).prompts}


async def test_discovery_timeout_ms_bounds_discovery(wf: Wf) -> None:
    config = wf.write_config(
        toml_config({"slow": py_upstream("--list-delay-ms", str(STALL_MS))}, server={"discovery_timeout_ms": 1500})
    )
    async with wf.stdio_client("auto", "--config", str(config)) as c:
        row = await wait_for(
            lambda: source_row(c, "slow"), lambda r: r.get("error") is not None, "discovery of a stalled upstream fails",
            OP_TIMEOUT,
        )
    assert "discovery timed out after 1500 ms" in row["error"], row


async def test_connect_timeout_ms_bounds_the_handshake(wf: Wf, fixture_upstream_bin: Path) -> None:
    source = {"command": str(fixture_upstream_bin), "args": ["--start-delay-ms", str(STALL_MS)], "connect_timeout_ms": 1500}
    config = wf.write_config(toml_config({"late": source}))
    async with wf.stdio_client("auto", "--config", str(config)) as c:
        row = await wait_for(
            lambda: source_row(c, "late"), lambda r: r.get("error") is not None, "connecting to a mute upstream fails",
            OP_TIMEOUT,
        )
    assert "connecting took longer than 1500 ms" in row["error"], row


async def test_call_timeout_ms_bounds_one_call(
    wf: Wf, fixture_upstream_bin: Path, upstream_events: UpstreamEvents
) -> None:
    source = {"command": str(fixture_upstream_bin), "args": upstream_events.args(), "call_timeout_ms": 1500}
    config = wf.write_config(toml_config({"fx": source}))
    async with wf.stdio_client("auto", "--config", str(config)) as c:
        with anyio.fail_after(OP_TIMEOUT):
            started = anyio.current_time()
            _, error = await call_outcome(c, "fx__slow", {"ms": STALL_MS})
            took = anyio.current_time() - started
            # The upstream is told the timed-out request is cancelled.
            call = await upstream_events.wait_for(event="call", tool="slow")
            await upstream_events.wait_for(event="cancelled", request_id=call["request_id"])
            # The session survives a timed-out call.
            again, again_error = await call_outcome(c, "fx__echo", {"message": "after"})
    assert error is not None and "fx" in error and "time" in error.lower(), error
    # The timeout fires on time (not at the next reaper tick far later).
    assert 1.4 < took < 5, took
    assert again_error is None, again_error


@pytest.mark.parametrize(
    ("live_ms", "delay_ms", "late_listed"),
    [(1_000, 3_000, False), (60_000, 8_000, True)],
    ids=["shorter-than-the-session", "longer-than-the-default"],
)
async def test_live_list_timeout_ms_bounds_a_live_listing(
    wf: Wf, live_ms: int, delay_ms: int, late_listed: bool
) -> None:
    delay_file = wf.root / "prompts-delay"
    config = wf.write_config(
        toml_config(
            {"up": py_upstream("--prompts-delay-file", str(delay_file))},
            server={**PY_SERVER, "live_list_timeout_ms": live_ms},
        )
    )
    async with wf.stdio_client("auto", "--config", str(config)) as c:
        # The Python upstream may start after wf's startup grace.
        first = await wait_for(
            lambda: prompt_names(c), lambda n: "up__hello" in n, "the upstream's prompts discovered", PY_START_TIMEOUT
        )
        assert "up__late" not in first, sorted(first)
        # A call waits for the live session to open (a Python start: seconds), so
        # the listing below measures the listing alone.
        with anyio.fail_after(PY_START_TIMEOUT):
            echoed = await c.call_tool("up__echo", {"text": "open"})
        assert not echoed.is_error, echoed
        with anyio.fail_after(OP_TIMEOUT):
            delay_file.write_text(str(delay_ms))
            listed = await prompt_names(c)
    # 1 s: the discovered listing (the live answer comes after 3 s; the 5 s default would wait for it).
    # 60 s: the live session's answer after 8 s, `late` included (the default would give up at 5 s).
    assert ("up__late" in listed) is late_listed and "up__hello" in listed, sorted(listed)
