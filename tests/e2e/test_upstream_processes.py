"""One upstream process per `shared` stdio source (issue #59).

wf used to start three server-everything processes for one client: one for
discovery, one for the rediscovery its start-up `list_changed` triggers, and
the persistent session. Discovery now keeps its session for the runtime
(`session::parked`) and rediscovery lists on the live session, so the backend
is started once. It asks for roots right after `initialized`, with no call in
flight: wf answers (the empty list) instead of logging that it cannot route it.

Each start of the backend is counted by a wrapper that appends its pid to a
file before it execs server-everything: a process that came and went between
two looks at /proc is counted too.
"""

from __future__ import annotations

from pathlib import Path

import anyio
import pytest

from conftest import Wf, children_of, content_text, proc_info, toml_config, wait_listed

pytestmark = pytest.mark.anyio

OP_TIMEOUT = 60
CALLS = 5

# Appends its pid to $STARTS, then becomes the backend (same pid).
WRAPPER = 'echo $$ >> "$STARTS"; exec "$0" "$@"'


def starts(path: Path) -> list[int]:
    return [int(line) for line in path.read_text().split()] if path.exists() else []


@pytest.mark.parametrize("front", ["stdio", "http"])
async def test_one_backend_process_per_shared_stdio_source(wf: Wf, everything_bin: Path, front: str) -> None:
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
            # A listing after the calls: a rediscovery, if one ran, reused the session.
            await wait_listed(c, "ev__echo")
        pids = starts(started)
        assert len(pids) == 1, f"server-everything was started {len(pids)} times: {pids}"
        backend = proc_info(pids[0])
        assert backend is not None and backend.state != "Z", "the one backend process is the live session"
        wf_pid = backend.ppid
        live = [p for p in children_of(wf_pid) if p.state != "Z"]
        assert [p.pid for p in live] == pids, f"wf's children: {live}"

    log = wf.logs[-1].read_text()
    refused = [line for line in log.splitlines() if "roots/list" in line and ("refused" in line or "cannot route" in line)]
    assert not refused, "roots/list at start was not answered:\n" + "\n".join(refused)
