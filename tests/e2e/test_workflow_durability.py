"""Durability of wf's SQLite state: drafts, artifacts, deployments and runs
survive a `kill -9` of `wf serve`; a run that was in progress is reported
`interrupted` by the next start with the same state directory.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import anyio
import pytest

from conftest import Wf, all_tools
from planner_support import fx_config, get_run, planner, publish_and_deploy, wait_node, wait_run

pytestmark = pytest.mark.anyio

OP_TIMEOUT = 60

NAP = {
    "name": "nap",
    "description": "Sleeps, then says so",
    "inputs": {"type": "object", "properties": {"ms": {"type": "integer", "minimum": 0}}, "required": ["ms"]},
    "nodes": [
        {"id": "sleep", "use": "wf.std.sleep", "args": {"ms": {"$ref": "inputs.ms"}}},
        {
            "id": "say",
            "use": "wf.std.template",
            "args": {"template": "slept {{ms}} ms", "values": {"ms": {"$ref": "nodes.sleep.output.slept_ms"}}},
        },
    ],
    "outputs": {"text": {"$ref": "nodes.say.output.text"}},
}


async def test_kill_9_keeps_state_and_marks_the_run_interrupted(wf: Wf) -> None:
    first = wf.start_http()
    async with wf.http_client(first) as c:
        with anyio.fail_after(OP_TIMEOUT):
            made = await publish_and_deploy(c, NAP, "nap")
            assert made["artifact"]["artifact"] == "nap@1"
            done = await planner(c, "run_deployment", {"name": "nap", "inputs": {"ms": 5}})
            assert done["status"] == "succeeded" and done["outputs"] == {"text": "slept 5 ms"}
            started = await planner(c, "run_deployment", {"name": "nap", "inputs": {"ms": 30000}, "wait": False})
            run_id = started["run_id"]
            await wait_node(c, run_id, "sleep", "running")
    # kill -9: no shutdown code runs.
    first.proc.kill()
    first.proc.wait(timeout=10)

    second = wf.start_http()
    async with wf.http_client(second) as c:
        with anyio.fail_after(OP_TIMEOUT):
            run, nodes = await get_run(c, run_id)
            assert run["status"] == "interrupted", run
            assert run["error"] == "the host stopped while the run was in progress"
            assert run["finished_at"] is not None and run["outputs"] is None
            assert run["origin"] == {"kind": "deployment", "name": "nap", "artifact": "nap@1"}
            assert run["inputs"] == {"ms": 30000}
            assert nodes["sleep"]["status"] == "interrupted" and nodes["sleep"]["args"] == {"ms": 30000}
            assert "say" not in nodes

            runs = (await planner(c, "list_runs"))["runs"]
            assert [(r["run_id"], r["status"]) for r in runs] == [
                (run_id, "interrupted"),
                (done["run_id"], "succeeded"),
            ]
            only = (await planner(c, "list_runs", {"status": "interrupted"}))["runs"]
            assert [r["run_id"] for r in only] == [run_id]

            # Draft, artifact and deployment are intact: the deployment is still a
            # tool with the workflow's input schema, and it runs.
            drafts = (await planner(c, "list_drafts"))["drafts"]
            assert [d["draft_id"] for d in drafts] == [made["draft"]["draft_id"]]
            tools = {t.name: t for t in await all_tools(c)}
            assert tools["wf_deploy__nap"].input_schema == NAP["inputs"]
            again = await planner(c, "run_deployment", {"name": "nap", "inputs": {"ms": 1}})
            assert again["status"] == "succeeded" and again["outputs"] == {"text": "slept 1 ms"}
            via_tool = await c.call_tool("wf_deploy__nap", {"ms": 2})
            assert not via_tool.is_error and via_tool.structured_content["outputs"] == {"text": "slept 2 ms"}
            # Publishing the same content again is still version 1 (the hash survived).
            republished = await planner(c, "publish_artifact", {"draft_id": made["draft"]["draft_id"]})
            assert (republished["artifact"], republished["hash"]) == ("nap@1", made["artifact"]["hash"])

    # The CLI reads the same database.
    listed = wf.run("runs", "--state-dir", str(wf.state_dir), "--json")
    assert listed.returncode == 0, listed.stderr
    statuses = {r["id"]: r["status"] for r in json.loads(listed.stdout)}
    assert statuses[run_id] == "interrupted" and statuses[done["run_id"]] == "succeeded"


async def test_a_clean_shutdown_also_interrupts_a_running_run(wf: Wf) -> None:
    """SIGTERM while a run is in progress: the shutting-down host marks the run
    interrupted itself ("the host shut down"), rather than leaving it `running` for
    the next start's sweep ("the host stopped", as after a kill -9)."""
    first = wf.start_http()
    async with wf.http_client(first) as c:
        with anyio.fail_after(OP_TIMEOUT):
            run_id = (await planner(c, "run_workflow", {"workflow": NAP, "inputs": {"ms": 30000}, "wait": False}))[
                "run_id"
            ]
            await wait_node(c, run_id, "sleep", "running")
    first.stop()
    assert first.proc.returncode == 0, f"wf serve exited {first.proc.returncode} on SIGTERM"
    # Before any other wf opens the state dir (which would sweep the run): the CLI only reads.
    listed = wf.run("runs", "--state-dir", str(wf.state_dir), "--json")
    assert listed.returncode == 0, listed.stderr
    assert {r["id"]: r["status"] for r in json.loads(listed.stdout)}[run_id] == "interrupted"

    second = wf.start_http()
    async with wf.http_client(second) as c:
        with anyio.fail_after(OP_TIMEOUT):
            run, nodes = await get_run(c, run_id)
            assert run["status"] == "interrupted", run
            assert run["error"] == "the host shut down while the run was in progress", run
            assert nodes["sleep"]["status"] == "interrupted", nodes


async def test_another_wf_on_the_same_state_dir_leaves_live_runs_alone(wf: Wf, fixture_upstream_bin: Path) -> None:
    """`wf serve` is running a workflow; meanwhile `wf run` starts with the same state
    dir (the default one is shared, $XDG_STATE_HOME/wf). The live run must stay
    `running` and then succeed. Its node waits at a gate (the fixture's slow call
    ends when a file exists), so `wf run` has all the time it needs, however slow."""
    gate = wf.root / "gate"
    gated = {"name": "gated", "nodes": [{"id": "wait", "use": "fx.slow", "args": {"ms": 600_000, "until": str(gate)}}]}
    server = wf.start_http("127.0.0.1", None, "--config", str(fx_config(wf, fixture_upstream_bin)))
    greet = wf.root / "greet.json"
    greet.write_text(json.dumps({"name": "g", "nodes": [{"id": "c", "use": "wf.std.const", "args": {"value": 1}}]}))
    async with wf.http_client(server) as c:
        with anyio.fail_after(OP_TIMEOUT):
            run_id = (await planner(c, "run_workflow", {"workflow": gated, "wait": False}))["run_id"]
            await wait_node(c, run_id, "wait", "running")
            other = await anyio.to_thread.run_sync(
                lambda: wf.run("run", str(greet), *wf.plugin_args(), timeout=60)
            )
            assert other.returncode == 0, other.stderr
            seen: list[Any] = []
            run, nodes = await get_run(c, run_id)
            seen.append((run["status"], nodes["wait"]["status"]))
            gate.touch()
            final, nodes = await wait_run(c, run_id)
            seen.append(final["status"])
            assert seen == [("running", "running"), "succeeded"], seen
            assert nodes["wait"]["output"] == {"gate": "open"}
