"""The planner surface (`wf_planner__*` tools) and deployments served as tools,
through the official `mcp` client, with the stateful Rust fixture as source `fx`
(next to the built-in `wf.std`).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import anyio
import pytest

from conftest import Wf, all_tools
from planner_support import FX, fx_config, planner, planner_error, publish_and_deploy, tool_json, wait_run

pytestmark = pytest.mark.anyio

OP_TIMEOUT = 60
FX_NODES = {"echo", "increment", "get_count", "slow", "progress", "crash", "pid"}
STD_NODES = {"runtime_error", "passthrough", "const", "template", "json_get", "merge", "assert", "sleep"}

FRONTS = [("stdio", "auto"), ("stdio", "legacy"), ("http", "auto"), ("http", "legacy")]

HELLO = {
    "name": "hello",
    "description": "Greets someone a number of times",
    "inputs": {
        "type": "object",
        "properties": {
            "name": {"type": "string", "description": "Who to greet"},
            "punct": {"type": "string", "description": "How to end the greeting"},
        },
        "required": ["name"],
    },
    "nodes": [
        {
            "id": "render",
            "use": "wf.std.template",
            "args": {"template": "Hello, {{who}}{{p}}", "values": {"who": {"$ref": "inputs.name"}, "p": "!"}},
        },
        {"id": "count", "use": "fx.increment", "args": {"by": 1}},
    ],
    "outputs": {"greeting": {"$ref": "nodes.render.output.text"}, "count": {"$ref": "nodes.count.output.count"}},
}


async def test_list_capabilities_filters_and_pages(wf: Wf, fixture_upstream_bin: Path) -> None:
    config = fx_config(wf, fixture_upstream_bin)
    async with wf.client("stdio", "auto", "--config", str(config)) as c:
        with anyio.fail_after(OP_TIMEOUT):
            everything = await planner(c, "list_capabilities", {"limit": 200})
            refs = {i["ref"] for i in everything["items"]}
            assert refs == {f"fx.{n}" for n in FX_NODES} | {f"wf.std.{n}" for n in STD_NODES}
            assert everything["total"] == len(refs) and everything["next_cursor"] is None
            assert all(i["kind"] == "node" for i in everything["items"])
            by_ref = {i["ref"]: i for i in everything["items"]}
            assert by_ref["fx.increment"]["stateful"] is True and by_ref["fx.increment"]["source"] == FX
            assert by_ref["wf.std.template"]["stateful"] is False

            # Pages of 4 add up to the whole list, in the same order, without repeats.
            paged: list[str] = []
            cursor = None
            for _ in range(20):
                page = await planner(c, "list_capabilities", {"limit": 4, **({"cursor": cursor} if cursor else {})})
                assert len(page["items"]) <= 4 and page["total"] == len(refs)
                paged += [i["ref"] for i in page["items"]]
                cursor = page["next_cursor"]
                if not cursor:
                    break
            assert paged == [i["ref"] for i in everything["items"]]

            # source filter; a query ranks matches best first (BM25 over names,
            # descriptions and parameters, any case); what shares no word is left out.
            only_fx = await planner(c, "list_capabilities", {"source": FX})
            assert {i["ref"] for i in only_fx["items"]} == {f"fx.{n}" for n in FX_NODES}
            counter = await planner(c, "list_capabilities", {"query": "COUNTER"})
            assert {i["ref"] for i in counter["items"]} == {"fx.increment", "fx.get_count"}
            both = await planner(c, "list_capabilities", {"query": "counter adds"})
            assert [i["ref"] for i in both["items"]][0] == "fx.increment"
            assert (await planner(c, "list_capabilities", {"query": "counter", "source": "wf.std"}))["items"] == []

            # Other kinds: tools, prompts, resources.
            tools = await planner(c, "list_capabilities", {"kind": "tool", "limit": 200})
            tool_refs = {i["ref"] for i in tools["items"]}
            assert {f"fx.{n}" for n in FX_NODES} | {"wf.std.sleep"} <= tool_refs
            prompts = await planner(c, "list_capabilities", {"kind": "prompt", "source": FX})
            assert [i["ref"] for i in prompts["items"]] == ["fx.greet"]
            resources = await planner(c, "list_capabilities", {"kind": "resource", "source": FX})
            assert [(i["ref"], i["uri"]) for i in resources["items"]] == [("fx.counter", "fixture://counter")]

            bad_kind = await planner_error(c, "list_capabilities", {"kind": "gadget"})
            assert "gadget" in bad_kind["error"] and bad_kind["hint"]
            bad_cursor = await planner_error(c, "list_capabilities", {"cursor": "not-a-cursor"})
            assert "cursor" in bad_cursor["error"] and bad_cursor["hint"]


async def test_describe_capability(wf: Wf, fixture_upstream_bin: Path) -> None:
    config = fx_config(wf, fixture_upstream_bin)
    async with wf.client("stdio", "auto", "--config", str(config)) as c:
        with anyio.fail_after(OP_TIMEOUT):
            slow = await planner(c, "describe_capability", {"ref": "fx.slow"})
            assert slow["ref"] == "fx.slow" and slow["source"] == FX and slow["name"] == "slow"
            assert slow["description"] == "Sleeps `ms` milliseconds, or until the file `until` exists"
            assert slow["input_schema"] == {
                "type": "object",
                "properties": {"ms": {"type": "integer"}, "until": {"type": "string"}},
                "required": ["ms"],
            }
            assert slow["stateful"] is True and slow["side_effects"] is True
            assert slow["example_node"] == {"id": "step1", "use": "fx.slow", "args": {"ms": "<ms>"}}

            template = await planner(c, "describe_capability", {"ref": "wf.std.template"})
            assert template["stateful"] is False and template["side_effects"] is False
            assert set(template["input_schema"]["required"]) == {"template", "values"}
            assert template["output_schema"]["properties"]["text"]["type"] == "string"

            missing = await planner_error(c, "describe_capability", {"ref": "fx.nope"})
            assert "fx.nope" in missing["error"] and "list_capabilities" in missing["hint"]


async def test_validate_workflow_lists_every_problem_with_node_and_path(wf: Wf, fixture_upstream_bin: Path) -> None:
    broken = {
        "name": "broken",
        "inputs": {"type": "object", "properties": {"n": {"type": "integer"}}},
        "nodes": [
            {"id": "a", "use": "fx.incremnt"},
            {"id": "b", "use": "fx.slow", "args": {"millis": 5}},
            {"id": "c", "use": "wf.std.passthrough", "args": {"value": {"$ref": "nodes.ghost.output"}}},
            {"id": "d", "use": "wf.std.template", "args": {"template": {"$ref": "inputs.n"}, "values": {}}},
            {"id": "e", "use": "wf.std.passthrough", "args": {"value": {"$ref": "inputs.missing"}}, "after": ["ghost"]},
            {"id": "c", "use": "wf.std.const", "args": {"value": 1}},
            {"id": "f g", "use": "wf.std.const", "args": {"value": {"$ref": "outputs.x"}}},
        ],
        "sessions": {"nosuch": "run"},
        "outputs": {"out": {"$ref": "nodes.nowhere.output"}},
    }
    config = fx_config(wf, fixture_upstream_bin)
    async with wf.client("stdio", "auto", "--config", str(config)) as c:
        with anyio.fail_after(OP_TIMEOUT):
            got = await planner(c, "validate_workflow", {"workflow": broken})
            assert got["valid"] is False and got["hint"]
            found = {(p.get("node"), p["path"], p["kind"]) for p in got["problems"]}
            assert found == {
                ("a", "nodes[0].use", "unknown_capability"),
                ("b", "nodes[1].args.ms", "missing_argument"),
                ("b", "nodes[1].args.millis", "unknown_argument"),
                ("c", "nodes[2].args.value", "unknown_node"),
                ("d", "nodes[3].args.template", "type_conflict"),
                ("e", "nodes[4].args.value", "unknown_input"),
                ("e", "nodes[4].after[0]", "unknown_node"),
                ("c", "nodes[5].id", "duplicate_node"),
                ("f g", "nodes[6].id", "invalid_id"),
                ("f g", "nodes[6].args.value", "malformed_reference"),
                (None, "outputs.out", "dangling_output"),
                (None, "sessions.nosuch", "unknown_source"),
            }, got["problems"]
            by_path = {p["path"]: p for p in got["problems"]}
            # The unknown capability's message suggests the near miss (edit distance).
            assert by_path["nodes[0].use"]["message"].endswith("did you mean fx.increment?")
            assert "fx.slow" in by_path["nodes[1].args.ms"]["message"]

            fine = await planner(c, "validate_workflow", {"workflow": HELLO})
            assert fine == {"valid": True, "problems": [], "hint": fine["hint"]}

            # Not a workflow document at all: an error with a hint, not a crash.
            garbage = await planner_error(c, "validate_workflow", {"workflow": {"nodes": "nope"}})
            assert "not a workflow document" in garbage["error"] and garbage["hint"]


async def test_drafts_and_publishing(wf: Wf, fixture_upstream_bin: Path) -> None:
    config = fx_config(wf, fixture_upstream_bin)
    invalid = {"name": "bad", "nodes": [{"id": "x", "use": "fx.nope"}]}
    async with wf.client("stdio", "auto", "--config", str(config)) as c:
        with anyio.fail_after(OP_TIMEOUT):
            # An invalid draft is saved (it is a draft) with its problems...
            draft = await planner(c, "save_draft", {"workflow": invalid})
            assert draft["valid"] is False
            assert [(p["node"], p["path"], p["kind"]) for p in draft["problems"]] == [
                ("x", "nodes[0].use", "unknown_capability")
            ]
            # ...but publishing it fails with a hint and the problems as detail.
            refused = await planner_error(c, "publish_artifact", {"draft_id": draft["draft_id"]})
            assert refused["error"] == "the draft is not valid"
            assert "save_draft" in refused["hint"]
            assert [p["kind"] for p in refused["detail"]] == ["unknown_capability"]
            # Running it is refused the same way, before anything runs.
            not_run = await planner_error(c, "run_workflow", {"draft_id": draft["draft_id"]})
            assert "not valid" in not_run["error"] and not_run["detail"]
            assert (await planner(c, "list_runs"))["runs"] == []

            # Fixing the draft in place (same id) makes it publishable.
            fixed = await planner(c, "save_draft", {"workflow": HELLO, "draft_id": draft["draft_id"]})
            assert fixed["draft_id"] == draft["draft_id"] and fixed["valid"] and fixed["name"] == "hello"
            got = await planner(c, "get_draft", {"draft_id": draft["draft_id"]})
            assert [(n["id"], n["use"], n["args"]) for n in got["workflow"]["nodes"]] == [
                (n["id"], n["use"], n.get("args", {})) for n in HELLO["nodes"]
            ]
            listed = await planner(c, "list_drafts")
            assert [d["draft_id"] for d in listed["drafts"]] == [draft["draft_id"]]

            v1 = await planner(c, "publish_artifact", {"draft_id": draft["draft_id"]})
            assert v1["artifact"] == "hello@1" and v1["version"] == 1 and len(v1["hash"]) == 64
            # Unchanged content: the same version again.
            again = await planner(c, "publish_artifact", {"draft_id": draft["draft_id"]})
            assert (again["artifact"], again["hash"]) == ("hello@1", v1["hash"])

            unknown = await planner_error(c, "get_draft", {"draft_id": "draft-nope"})
            assert unknown["hint"]
            bad_name = await planner_error(c, "deploy", {"name": "has space", "artifact": "hello@1"})
            assert "invalid deployment name" in bad_name["error"]
            no_artifact = await planner_error(c, "deploy", {"name": "ok", "artifact": "nothing@3"})
            assert no_artifact["hint"]


async def test_call_capability_uses_the_persistent_session(wf: Wf, fixture_upstream_bin: Path) -> None:
    """call_capability runs on the same upstream session as proxied calls and
    workflows: the counter it increments is the one fx__get_count reads."""
    config = fx_config(wf, fixture_upstream_bin)
    async with wf.client("stdio", "auto", "--config", str(config)) as c:
        with anyio.fail_after(OP_TIMEOUT):
            pid = (await tool_json(c, "fx__pid"))["pid"]
            got = await planner(c, "call_capability", {"ref": "fx.increment", "arguments": {"by": 5}})
            assert got == {"ref": "fx.increment", "output": {"count": 5}}
            assert await tool_json(c, "fx__get_count") == {"count": 5}
            await tool_json(c, "fx__increment")
            got = await planner(c, "call_capability", {"ref": "fx.get_count"})
            assert got["output"] == {"count": 6}
            assert (await planner(c, "call_capability", {"ref": "fx.pid"}))["output"] == {"pid": pid}
            # A workflow sees the same counter.
            run = await planner(
                c,
                "run_workflow",
                {"workflow": {"nodes": [{"id": "n", "use": "fx.increment"}], "outputs": {"c": {"$ref": "nodes.n.output.count"}}}},
            )
            assert run["status"] == "succeeded" and run["outputs"] == {"c": 7}
            # Local nodes run too; a failing node is an error with a hint.
            std = await planner(c, "call_capability", {"ref": "wf.std.const", "arguments": {"value": [1, 2]}})
            assert std["output"] == {"value": [1, 2]}
            failed = await planner_error(
                c, "call_capability", {"ref": "wf.std.runtime_error", "arguments": {"code": "nope", "message": "boom"}}
            )
            assert "nope: boom" in failed["error"] and failed["hint"]
            unknown = await planner_error(c, "call_capability", {"ref": "fx.missing"})
            assert "fx.missing" in unknown["error"]


@pytest.mark.parametrize("front", FRONTS, ids=[f"{t}-{m}" for t, m in FRONTS])
async def test_deployment_is_a_tool(wf: Wf, fixture_upstream_bin: Path, front: tuple[str, str]) -> None:
    config = fx_config(wf, fixture_upstream_bin)
    async with wf.client(*front, "--config", str(config)) as c:
        with anyio.fail_after(OP_TIMEOUT):
            names = {t.name for t in await all_tools(c)}
            assert not any(n.startswith("wf_deploy__") for n in names), names

            made = await publish_and_deploy(c, HELLO, "hello-v")
            assert made["deploy"] == {
                "deployment": "hello-v",
                "artifact": "hello@1",
                "tool": "wf_deploy__hello-v",
                "hint": made["deploy"]["hint"],
            }
            tools = {t.name: t for t in await all_tools(c)}
            tool = tools["wf_deploy__hello-v"]
            assert tool.input_schema == HELLO["inputs"]
            assert tool.description == "Greets someone a number of times (deployment of hello@1)"

            result = await c.call_tool("wf_deploy__hello-v", {"name": "Ada"})
            assert not result.is_error, result.structured_content
            out: dict[str, Any] = result.structured_content or {}
            assert out["status"] == "succeeded"
            assert out["outputs"] == {"greeting": "Hello, Ada!", "count": 1}
            assert {n["id"]: n["status"] for n in out["nodes"]} == {"render": "succeeded", "count": "succeeded"}

            # The run is recorded with its deployment as origin.
            runs = (await planner(c, "list_runs"))["runs"]
            assert runs[0]["run_id"] == out["run_id"]
            assert runs[0]["origin"] == {"kind": "deployment", "name": "hello-v", "artifact": "hello@1"}

            # Inputs are checked against the schema: an error result, nothing runs.
            bad = await c.call_tool("wf_deploy__hello-v", {"name": 42})
            assert bad.is_error
            assert "name" in bad.structured_content["error"] and bad.structured_content["hint"]
            missing = await c.call_tool("wf_deploy__hello-v", {})
            assert missing.is_error and "missing required input" in missing.structured_content["error"]

            # run_deployment is the same thing through the planner.
            again = await planner(c, "run_deployment", {"name": "hello-v", "inputs": {"name": "Bo"}})
            assert again["outputs"] == {"greeting": "Hello, Bo!", "count": 2}

            # Redeploying a new version changes the tool's schema.
            v2 = {
                **HELLO,
                "description": "Greets, v2",
                "inputs": {**HELLO["inputs"], "properties": {**HELLO["inputs"]["properties"], "loud": {"type": "boolean"}}},
            }
            draft = await planner(c, "save_draft", {"workflow": v2})
            artifact = await planner(c, "publish_artifact", {"draft_id": draft["draft_id"]})
            assert artifact["artifact"] == "hello@2"
            await planner(c, "deploy", {"name": "hello-v", "artifact": "hello"})
            tools = {t.name: t for t in await all_tools(c)}
            assert "loud" in tools["wf_deploy__hello-v"].input_schema["properties"]
            assert tools["wf_deploy__hello-v"].description == "Greets, v2 (deployment of hello@2)"
            # A failed run is an error result carrying the run.
            boom = {
                "name": "boom",
                "nodes": [{"id": "x", "use": "wf.std.runtime_error", "args": {"code": "bad", "message": "on purpose"}}],
            }
            await publish_and_deploy(c, boom, "boom")
            failed = await c.call_tool("wf_deploy__boom", {})
            assert failed.is_error
            assert failed.structured_content["status"] == "failed"
            assert "bad: on purpose" in failed.structured_content["error"]


async def test_long_deployment_name_gets_a_valid_tool_name(wf: Wf) -> None:
    """A 40-character deployment name does not fit `wf_deploy__<name>` within the
    default 48-character limit: the tool gets a shortened, valid name, which the
    deploy reply reports and which runs the deployment."""
    name = "a-rather-long-deployment-name-for-tests1"  # 40 characters
    workflow = {"name": "c", "nodes": [{"id": "c", "use": "wf.std.const", "args": {"value": 7}}], "outputs": {"v": {"$ref": "nodes.c.output.value"}}}
    async with wf.client("stdio", "auto") as c:
        with anyio.fail_after(OP_TIMEOUT):
            made = await publish_and_deploy(c, workflow, name)
            tool = made["deploy"]["tool"]
            assert tool and tool.startswith("wf_deploy__") and len(tool) <= 48
            assert all(ch.isalnum() or ch in "_-" for ch in tool)
            listed = [t.name for t in await all_tools(c) if t.name.startswith("wf_deploy__")]
            assert listed == [tool]
            result = await c.call_tool(tool, {})
            assert not result.is_error and result.structured_content["outputs"] == {"v": 7}
            assert (await planner_error(c, "deploy", {"name": name + "x", "artifact": "c@1"}))["hint"]


async def test_run_workflow_wait_timeout_returns_while_running(wf: Wf, fixture_upstream_bin: Path) -> None:
    """The node waits at a gate (the fixture's slow call ends when a file exists), so
    the 100 ms wait always ends first, however slow the machine; the run goes on."""
    gate = wf.root / "gate"
    workflow = {"name": "nap", "nodes": [{"id": "nap", "use": "fx.slow", "args": {"ms": 600_000, "until": str(gate)}}]}
    async with wf.client("stdio", "auto", "--config", str(fx_config(wf, fixture_upstream_bin))) as c:
        with anyio.fail_after(OP_TIMEOUT):
            early = await planner(c, "run_workflow", {"workflow": workflow, "timeout_ms": 100})
            assert early["status"] == "running" and early["outputs"] is None
            assert [(n["id"], n["status"]) for n in early["nodes"]] == [("nap", "running")]
            unknown = await planner_error(c, "get_run", {"run_id": "run-nope"})
            assert "run-nope" in unknown["error"] and unknown["hint"]
            gate.touch()
            final, nodes = await wait_run(c, early["run_id"])
            assert final["status"] == "succeeded" and final["outputs"] == {}
            assert nodes["nap"]["output"] == {"gate": "open"}
