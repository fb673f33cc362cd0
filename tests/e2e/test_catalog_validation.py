"""One plugin's invalid schemas must not cost a client the catalog.

The fixture plugin `bad-schema` (tests/fixtures/bad-schema, default source `bad`)
serves a node spec `stringy` whose input schema is `{"type": "string"}` (also
served as a tool), a tool `typo` with `"type": "integr"` and `"required": "n"`,
and good capabilities: tools `echo`, `count`, `miscount`, node spec and tool
`double`, prompt `greet`. Served beside wf.std and server-everything, the
official client's list_tools() succeeds in both protocol generations, the bad
capabilities are absent from every surface (proxy, planner catalog) and listed
with their reasons in `list_sources`, the log, `wf plugins` and `wf check`
(exit 1). A result that breaks its tool's output schema is a clear tool error.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import anyio
import pytest

from admin_support import sources_by_name, wait_tools
from conftest import Wf, all_prompts, all_tools, content_text, toml_config
from planner_support import planner

OP_TIMEOUT = 60
BAD = {"typo", "stringy"}
GOOD = {"echo", "count", "miscount", "double"}
# What each left-out capability's reason must say.
REASONS = {
    ("tool", "typo"): ['"integr" is not a JSON Schema type', "required: must be an array"],
    ("tool", "stringy"): ['inputSchema must have "type": "object"'],
    ("node", "stringy"): ['inputSchema must have "type": "object"'],
}


def setup(wf: Wf, everything_bin: Path) -> Path:
    wf.install("bad-schema")
    return wf.write_config(toml_config({"everything": {"command": str(everything_bin)}}))


def bad_tools(names: set[str]) -> set[str]:
    return {n.removeprefix("bad__") for n in names if n.startswith("bad__")}


@pytest.mark.anyio
@pytest.mark.parametrize("mode", ["legacy", "auto"])
async def test_bad_capabilities_are_left_out_and_the_rest_served(wf: Wf, everything_bin: Path, mode: str) -> None:
    config = setup(wf, everything_bin)
    async with wf.stdio_client(mode, "--config", str(config)) as c:
        # server-everything (node) may start after the first list on a busy machine.
        tools = await wait_tools(c, lambda names: "everything__echo" in names, "everything discovered", OP_TIMEOUT)
        with anyio.fail_after(OP_TIMEOUT):
            tools = {t.name for t in await all_tools(c)}
            prompts = {p.name for p in await all_prompts(c)}
        assert bad_tools(tools) == GOOD, sorted(tools)
        assert {"wf_std__passthrough", "wf_std__template"} <= tools, sorted(tools)
        assert {"everything__echo", "everything__get-sum"} <= tools, sorted(tools)
        assert "bad__greet" in prompts, sorted(prompts)

        # The good tools work; a result that breaks its output schema is a tool error.
        with anyio.fail_after(OP_TIMEOUT):
            echoed = await c.call_tool("bad__echo", {"text": "hi"})
            counted = await c.call_tool("bad__count", {})
            broken = await c.call_tool("bad__miscount", {})
        assert content_text(echoed.content) == "hi"
        assert counted.structured_content == {"n": 1}, counted
        assert broken.is_error, broken
        assert (
            "tool bad.miscount returned a result that does not match its output schema: "
            "structuredContent.n: expected integer, got string"
        ) in content_text(broken.content)

        # The planner catalog has the good node spec only.
        with anyio.fail_after(OP_TIMEOUT):
            caps = await planner(c, "list_capabilities", {"source": "bad"})
        refs = json.dumps(caps)
        assert "bad.double" in refs and "bad.stringy" not in refs, refs

        # list_sources names each capability left out, with its reason.
        with anyio.fail_after(OP_TIMEOUT):
            rows = await sources_by_name(c)
        rejected = {(r["kind"], r["name"]): r["reason"] for r in rows["bad"]["rejected"]}
        assert set(rejected) == set(REASONS), rejected
        for key, needles in REASONS.items():
            for needle in needles:
                assert needle in rejected[key], (key, rejected[key])
        assert rows["everything"]["rejected"] == [] and rows["wf.std"]["rejected"] == []
        assert rows["bad"]["state"] == "ready"

    log = wf.logs[-1].read_text()
    for kind, name in REASONS:
        assert f'{kind} "{name}" left out' in log, log[-3000:]


def test_wf_check_names_each_bad_capability_and_exits_1(wf: Wf, everything_bin: Path) -> None:
    config = setup(wf, everything_bin)
    lib = str(wf.plugin_dir / "libfixture_bad_schema.so")
    for deep in ([], ["--deep"]):
        proc = wf.run("check", "--config", str(config), *wf.plugin_args(), *deep)
        assert proc.returncode == 1, (deep, proc.stdout, proc.stderr)
        lines = [line for line in proc.stderr.splitlines() if "left out" in line]
        assert len(lines) == len(REASONS), (deep, proc.stderr)
        for (kind, name), needles in REASONS.items():
            line = next((x for x in lines if f'{kind} "{name}" left out' in x), None)
            assert line is not None, (kind, name, proc.stderr)
            assert line.startswith(f"{lib}: default source bad: "), line
            for needle in needles:
                assert needle in line, line
        assert "everything" not in proc.stderr and "wf.std" not in proc.stderr, proc.stderr
        assert f"wf check: {len(REASONS)} problem(s)" in proc.stderr


def test_wf_plugins_lists_capabilities_left_out(wf: Wf) -> None:
    wf.install("bad-schema")
    doc: dict[str, Any] = wf.plugins_json()
    left = {e["source"]: e["capabilities"] for e in doc["left_out"]}
    assert set(left) == {"bad"}, left
    assert {(r["kind"], r["name"]) for r in left["bad"]} == set(REASONS)
    text = wf.run("plugins", *wf.plugin_args()).stdout
    assert f"capabilities left out ({len(REASONS)}):" in text, text
    assert 'bad: tool "typo" left out: inputSchema.properties.n.type: "integr" is not a JSON Schema type' in text, text


def test_wf_check_passes_without_the_bad_plugin(wf: Wf, everything_bin: Path) -> None:
    config = wf.write_config(toml_config({"everything": {"command": str(everything_bin)}}))
    proc = wf.run("check", "--deep", "--config", str(config), *wf.plugin_args())
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.startswith("ok: "), proc.stdout


def test_unknown_capability_suggests_the_near_miss(wf: Wf, fixture_upstream_bin: Path) -> None:
    """docs/workflows.md: a misspelt `use` gets a "did you mean" from the live catalog."""
    config = wf.write_config(toml_config({"counter": {"command": str(fixture_upstream_bin)}}))
    path = wf.root / "typo.json"
    path.write_text(json.dumps({"name": "typo", "nodes": [{"id": "a", "use": "counter.incremnt", "args": {}}]}))
    proc = wf.run("run", str(path), "--config", str(config), *wf.plugin_args(), "--log-level", "error")
    assert proc.returncode == 2, proc.stderr
    assert (
        f'{path}: nodes[0].use [unknown_capability]: no capability "counter.incremnt": did you mean counter.increment?'
        in proc.stderr.splitlines()
    ), proc.stderr
