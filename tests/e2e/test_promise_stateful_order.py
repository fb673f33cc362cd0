"""Nodes of one stateful source run one at a time, in the document's order,
even when nothing orders them (no references between them): they share one
upstream session, whose state each node sees.

The fixture upstream's counter is that state: independent `increment` nodes by
1, 10 and 100, with `slow` nodes between them, must see 1, 11 and 111, and no
node of the source may start before the previous one finished.
"""

from __future__ import annotations

from pathlib import Path

import anyio
import pytest

from conftest import Wf, toml_config
from planner_support import get_run, planner

pytestmark = pytest.mark.anyio

OP_TIMEOUT = 60

WORKFLOW = {
    "name": "counter",
    "nodes": [
        {"id": "one", "use": "fx.increment", "args": {"by": 1}},
        {"id": "nap1", "use": "fx.slow", "args": {"ms": 300}},
        {"id": "ten", "use": "fx.increment", "args": {"by": 10}},
        {"id": "nap2", "use": "fx.slow", "args": {"ms": 300}},
        {"id": "hundred", "use": "fx.increment", "args": {"by": 100}},
        {"id": "read", "use": "fx.get_count", "args": {}},
    ],
    "outputs": {
        "one": {"$ref": "nodes.one.output.count"},
        "ten": {"$ref": "nodes.ten.output.count"},
        "hundred": {"$ref": "nodes.hundred.output.count"},
        "read": {"$ref": "nodes.read.output.count"},
    },
}


async def test_nodes_of_a_stateful_source_run_one_at_a_time_in_document_order(
    wf: Wf, fixture_upstream_bin: Path
) -> None:
    config = wf.write_config(toml_config({"fx": {"command": str(fixture_upstream_bin)}}))
    async with wf.stdio_client("auto", "--config", str(config)) as c:
        with anyio.fail_after(OP_TIMEOUT):
            done = await planner(c, "run_workflow", {"workflow": WORKFLOW})
            assert done["status"] == "succeeded", done
            assert done["outputs"] == {"one": 1, "ten": 11, "hundred": 111, "read": 111}, done
            _, nodes = await get_run(c, done["run_id"])
    order = [n["id"] for n in WORKFLOW["nodes"]]
    spans = [(nodes[i]["started_at"], nodes[i]["finished_at"]) for i in order]
    for (before, b), (after, a) in zip(zip(order, spans), zip(order[1:], spans[1:])):
        assert b[1] <= a[0], f"{after} started ({a[0]}) before {before} finished ({b[1]}): {spans}"
