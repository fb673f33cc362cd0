"""How many processes a `shared` stdio upstream costs.

wf used to start three server-everything processes for one client: one for
discovery, one for the rediscovery its start-up `list_changed` triggered,
and the persistent session. A rediscovery that the live session's own
`list_changed` asks for now lists on that session, so at most two are ever
started (discovery's one-shot process and the persistent session), and one
is left at steady state. server-everything also asks for roots right after
`initialized`, by when no call may be in flight: wf answers with no roots
instead of logging that it cannot route the request. And wf keeps
transparent huge pages off for its own heap, not for the upstreams it starts.

Each start of the backend is counted by a wrapper that appends its pid to a
file before it execs server-everything, so a process that came and went
between two looks at /proc is counted too.
"""

from __future__ import annotations

from pathlib import Path

import anyio
import pytest

from conftest import Wf, content_text, proc_info, toml_config, wait_listed

pytestmark = pytest.mark.anyio

OP_TIMEOUT = 60
# Discovery's process goes with the MCP shutdown: stdin closed, up to 3 s, SIGTERM.
STEADY_WITHIN = 30
CALLS = 5

# Appends its pid to $STARTS, then becomes the backend (same pid).
WRAPPER = 'echo $$ >> "$STARTS"; exec "$0" "$@"'


def starts(path: Path) -> list[int]:
    return [int(line) for line in path.read_text().split()] if path.exists() else []


def thp_enabled(pid: int) -> int:
    """`THP_enabled` of /proc/PID/status: 0 once a process opted out (PR_SET_THP_DISABLE)."""
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("THP_enabled:"):
            return int(line.split()[1])
    pytest.fail(f"no THP_enabled in /proc/{pid}/status (kernel without transparent huge pages?)")


def alive(pids: list[int]) -> list[int]:
    return [p for p in pids if (info := proc_info(p)) is not None and info.state != "Z"]


@pytest.mark.parametrize("front", ["stdio", "http"])
async def test_a_shared_stdio_source_costs_one_process_at_steady_state(
    wf: Wf, everything_bin: Path, front: str
) -> None:
    started = wf.root / "starts"
    config = wf.write_config(
        toml_config(
            {
                "ev": {
                    "command": "/bin/sh",
                    "args": ["-c", WRAPPER, str(everything_bin)],
                    "env": {"STARTS": str(started)},
                }
            }
        )
    )
    async with wf.client(front, "auto", "--config", str(config)) as c:
        with anyio.fail_after(OP_TIMEOUT):
            await wait_listed(c, "ev__echo")
            for i in range(CALLS):
                r = await c.call_tool("ev__echo", {"message": f"hi {i}"})
                assert not r.is_error, content_text(r.content)
            await wait_listed(c, "ev__echo")
        with anyio.move_on_after(STEADY_WITHIN):
            while len(alive(starts(started))) > 1:
                await anyio.sleep(0.2)
        pids = starts(started)
        assert 1 <= len(pids) <= 2, f"server-everything was started {len(pids)} times: {pids}"
        assert len(alive(pids)) == 1, f"backend processes still running: {alive(pids)} of {pids}"
        # The one left is the persistent session: the calls still work on it.
        with anyio.fail_after(OP_TIMEOUT):
            r = await c.call_tool("ev__echo", {"message": "still here"})
            assert not r.is_error, content_text(r.content)
        assert starts(started) == pids, "a call after steady state started another backend"
        # wf keeps transparent huge pages off for its own heap; the upstream it
        # started gets the system's setting back.
        backend = proc_info(alive(pids)[0])
        assert backend is not None
        assert thp_enabled(backend.ppid) == 0, "wf's own memory takes no transparent huge pages"
        assert thp_enabled(backend.pid) == 1, "the upstream inherited wf's THP opt-out"

    log = wf.logs[-1].read_text()
    refused = [line for line in log.splitlines() if "roots/list" in line and ("refused" in line or "cannot route" in line)]
    assert not refused, "roots/list at start was not answered:\n" + "\n".join(refused)
