"""The cancellation contract (docs/plugin-authoring.md, "Async work and
cancellation"), driven with the official client against `wf serve`:

- a client's cancellation is answered at once, whatever the plugin's thread
  is doing (even stuck in `std::thread::sleep`);
- the plugin's `ctx.cancelled()` fires every time, before its future is
  dropped, and an awaiting cleanup in that branch runs to its end - on the
  very first cancelled call of a fresh `wf serve` too;
- admin `list_sources` / `status` count the calls in flight per source.

The fixture plugin tests/fixtures/cancel writes one line per event into the
file named by the call's `marker` argument: `started`, `cancelled` (its
`ctx.cancelled()` branch, after an awaited cleanup), `dropped` (a `Drop`
guard in the call's future), `woke` (the blocking tool's thread woke).
"""

from __future__ import annotations

import statistics
import time
from functools import partial
from pathlib import Path
from typing import Any

import anyio
import pytest
from mcp import Client

from admin_support import admin, sources_by_name, wait_for
from conftest import Wf

pytestmark = pytest.mark.anyio

OP_TIMEOUT = 30
# The bound the issue sets for answering a cancelled call; it IS the behaviour.
ANSWER_BOUND_S = 0.100
# How long the blocking tool sleeps: 20x the bound, so a host that waits for
# the plugin's thread cannot pass by luck.
BLOCK_MS = 2000
TRIES = 5
FRONTS = [("stdio", "auto"), ("stdio", "legacy"), ("http", "auto")]


def lines(marker: Path) -> list[str]:
    return marker.read_text().split() if marker.exists() else []


async def wait_line(marker: Path, line: str, timeout: float = OP_TIMEOUT) -> list[str]:
    """Waits until the fixture wrote `line` into `marker`."""

    async def probe() -> list[str]:
        return lines(marker)

    return await wait_for(probe, lambda seen: line in seen, f"{marker.name}: {line!r}", timeout, 0.005)


async def cancel_once_started(c: Client, tool: str, arguments: dict[str, Any], marker: Path) -> float:
    """Calls `tool`, cancels the call as soon as the plugin wrote `started`,
    and returns how long the client waited from cancelling to being done
    with the call (the client's own view of "answered")."""
    with anyio.fail_after(OP_TIMEOUT):
        async with anyio.create_task_group() as tg:
            tg.start_soon(partial(c.call_tool, tool, arguments))
            await wait_line(marker, "started")
            started = time.monotonic()
            tg.cancel_scope.cancel()
        return time.monotonic() - started


# The fixture plugin runs in a child by default (it is not bundled, issue 32)
# and in wf when the config says so: every test runs both ways.
ISOLATION = {"now": "process"}


@pytest.fixture(autouse=True, params=["process", "in_process"])
def isolation(request: pytest.FixtureRequest) -> str:
    ISOLATION["now"] = request.param
    return request.param


def serve(wf: Wf, transport: str, mode: str) -> Client:
    wf.install("cancel")
    # In process, an unpinned third party's plugin takes the operator's opt-in;
    # in a child, the fixture writes its markers into the test's folder, which
    # the strict sandbox closes (test_sandbox.py covers the sandbox).
    opt_in = (
        "allow_unpinned_in_process = true\n" if ISOLATION["now"] == "in_process" else 'sandbox = "off"\n'
    )
    config = wf.write_config(
        f'[plugins.fixture-cancel]\nisolation = "{ISOLATION["now"]}"\n{opt_in}', "cancel.toml"
    )
    return wf.client(transport, mode, "--config", str(config))


@pytest.mark.parametrize(("transport", "mode"), FRONTS)
async def test_first_cancelled_call_runs_the_cancelled_branch(wf: Wf, transport: str, mode: str) -> None:
    """The first call cancelled in a fresh `wf serve`: the plugin's
    `ctx.cancelled()` branch runs (its awaited cleanup included), then the
    future is dropped; the second call the same."""
    async with serve(wf, transport, mode) as c:
        for n in range(2):
            marker = wf.root / f"wait-{n}.log"
            await cancel_once_started(c, "cancel__wait", {"marker": str(marker)}, marker)
            seen = await wait_line(marker, "dropped")
            assert seen == ["started", "cancelled", "dropped"], f"call {n}: {seen}"


async def test_calls_in_flight_per_source(wf: Wf) -> None:
    """list_sources and status count the source's calls the host waits on;
    a cancelled call stops counting at once."""
    async with serve(wf, "stdio", "auto") as c:
        rows = await sources_by_name(c)
        assert rows["cancel"]["calls_in_flight"] == 0, rows["cancel"]
        assert rows["wf.std"]["calls_in_flight"] == 0, rows["wf.std"]
        assert (await admin(c, "status"))["calls_in_flight"]["cancel"] == 0

        marker = wf.root / "in-flight.log"
        with anyio.fail_after(OP_TIMEOUT):
            async with anyio.create_task_group() as tg:
                tg.start_soon(partial(c.call_tool, "cancel__wait", {"marker": str(marker)}))
                await wait_line(marker, "started")
                rows = await sources_by_name(c)
                assert rows["cancel"]["calls_in_flight"] == 1, rows["cancel"]
                assert rows["wf.std"]["calls_in_flight"] == 0, rows["wf.std"]
                status = await admin(c, "status")
                assert status["calls_in_flight"]["cancel"] == 1, status["calls_in_flight"]
                tg.cancel_scope.cancel()

        async def count() -> int:
            return (await sources_by_name(c))["cancel"]["calls_in_flight"]

        await wait_for(count, lambda n: n == 0, "calls_in_flight back to 0", timeout=OP_TIMEOUT)


@pytest.mark.parametrize(("transport", "mode"), FRONTS)
async def test_blocking_tool_cancel_is_answered_within_100ms(wf: Wf, transport: str, mode: str) -> None:
    """A tool stuck in `std::thread::sleep` does not hold the client's
    cancelled call: the client is done with it within 100 ms.

    Robust, not lucky: the bound is on the median of 5 tries; every single
    try must also be answered before the plugin's thread woke (checked from
    the marker, not from a clock), and the next call is served at once."""
    async with serve(wf, transport, mode) as c:
        waits = []
        for n in range(TRIES):
            marker = wf.root / f"block-{n}.log"
            waited = await cancel_once_started(c, "cancel__block", {"marker": str(marker), "ms": BLOCK_MS}, marker)
            assert "woke" not in lines(marker), f"try {n}: the answer waited for the blocked thread ({waited:.3f}s)"
            waits.append(waited)
            with anyio.fail_after(OP_TIMEOUT):
                ok = await c.call_tool("wf_std__const", {"value": n})
            assert ok.structured_content == {"value": n}
            # One blocked plugin thread at a time: the runtime has two.
            await wait_line(marker, "woke")
        median = statistics.median(waits)
        print(f"{transport}/{mode}: cancelled blocking call answered in {[round(w * 1000, 1) for w in waits]} ms")
        assert median < ANSWER_BOUND_S, f"median {median * 1000:.1f} ms over {[round(w * 1000, 1) for w in waits]} ms"
