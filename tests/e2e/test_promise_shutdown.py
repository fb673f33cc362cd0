"""SIGTERM and SIGINT stop `wf serve` cleanly, and the runs it was executing are
marked `interrupted` by the stopping host itself, with the shutdown's error
("host shut down"), not the next start's sweep ("host stopped").

The run is read back with `wf runs --json`, which only reads the database: no
other `wf serve` ever starts on that state directory, so nothing else could
have marked the run.
"""

from __future__ import annotations

import json
import signal

import anyio
import pytest

from conftest import Wf, tail
from planner_support import planner, wait_node

pytestmark = pytest.mark.anyio

OP_TIMEOUT = 60
SHUT_DOWN = "the host shut down while the run was in progress"

NAP = {
    "name": "nap",
    "nodes": [{"id": "sleep", "use": "wf.std.sleep", "args": {"ms": 600000}}],
}


@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGINT], ids=["SIGTERM", "SIGINT"])
async def test_a_signal_interrupts_the_hosts_own_runs_with_the_shutdown_error(wf: Wf, sig: signal.Signals) -> None:
    server = wf.start_http()
    async with wf.http_client(server) as c:
        with anyio.fail_after(OP_TIMEOUT):
            run_id = (await planner(c, "run_workflow", {"workflow": NAP, "wait": False}))["run_id"]
            await wait_node(c, run_id, "sleep", "running")
    server.proc.send_signal(sig)
    try:
        code = server.proc.wait(timeout=OP_TIMEOUT)
    except Exception:
        pytest.fail(f"wf serve still runs {OP_TIMEOUT}s after {sig.name}:\n{tail(server.log)}")
    assert code == 0, f"wf exited {code} on {sig.name}:\n{tail(server.log)}"

    listed = wf.run("runs", "--state-dir", str(wf.state_dir), "--json")
    assert listed.returncode == 0, listed.stderr
    runs = {r["id"]: r for r in json.loads(listed.stdout)}
    run = runs[run_id]
    assert (run["status"], run["error"]) == ("interrupted", SHUT_DOWN), run
    assert run["finished_at"] is not None, run
