"""The example source of docs/wasm-plugins.md ("units"), written in Python
(componentize-py) and in JavaScript (componentize-js), each built into a
WebAssembly component (tests/wasm/build.sh) and dropped into a plugins folder
with no config: the real `wf` serves its tools, prompt, resource and node to
the official Python client, and a workflow runs the node.

One `wf serve --http` per language serves every test of this module.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import anyio
import pytest
from mcp import types

from conftest import Wf, all_prompts, all_resources, content_text, toml_config, wait_listed
from wasm_support import DISCOVERY, LISTED_TIMEOUT, OP_TIMEOUT, component, ok

pytestmark = pytest.mark.anyio

LANGUAGES = {"python": "units-py.wasm", "javascript": "units-js.wasm"}


@pytest.fixture(scope="module", params=sorted(LANGUAGES))
def units(request: pytest.FixtureRequest, wf_module: Wf) -> Iterator[tuple[Wf, Any]]:
    """A wf whose plugins folder holds only the units component of one language
    (as units.wasm), served over HTTP."""
    folder = wf_module.root / request.param
    # Its logs are the module's, so a failing test's report shows them.
    wf = Wf(bin=wf_module.bin, fixtures_dir=wf_module.fixtures_dir, root=folder, logs=wf_module.logs)
    wf.install_file(component(LANGUAGES[request.param]), "units.wasm")
    # No source is configured; the bound on discovery is raised because discovery
    # compiles the component first (tens of seconds under a debug wf on a loaded machine).
    config = wf.write_config(toml_config({}, server=DISCOVERY))
    try:
        yield wf, wf.start_http("127.0.0.1", None, "--config", str(config))
    finally:
        wf.close()


def test_wf_plugins_lists_the_component_with_its_interface(units: tuple[Wf, Any]) -> None:
    wf, _ = units
    doc = wf.plugins_json()
    ours = [c for c in doc["components"] if Path(c["file"]).name == "units.wasm"]
    assert len(ours) == 1, doc
    assert ours[0]["interface"] == "wf:source/guest@1.0.0", ours
    assert not doc["refused"], doc["refused"]
    text = wf.run("plugins", *wf.plugin_args(), check=True).stdout
    assert "units.wasm" in text and "wf:source/guest@1.0.0" in text, text


async def test_catalog(units: tuple[Wf, Any]) -> None:
    wf, server = units
    async with wf.http_client(server) as c:
        tools = {t.name: t for t in await wait_listed(c, "units__convert", LISTED_TIMEOUT)}
        with anyio.fail_after(OP_TIMEOUT):
            prompts = {p.name: p for p in await all_prompts(c)}
            resources = {str(r.uri): r for r in await all_resources(c)}
    assert {"units__convert", "units__convert_many"} <= set(tools), sorted(tools)
    convert = tools["units__convert"]
    assert convert.description == "Converts a value from one unit to another"
    assert convert.input_schema["required"] == ["value", "from", "to"]
    assert "mi" in convert.input_schema["properties"]["to"]["enum"]
    assert convert.output_schema and convert.output_schema["required"] == ["value", "unit"]
    assert tools["units__convert_many"].input_schema["required"] == ["values", "from"]
    explain = prompts.get("units__explain_unit")
    assert explain is not None, sorted(prompts)
    assert [(a.name, a.required) for a in explain.arguments or []] == [("unit", True)]
    assert resources["units://table"].mime_type == "text/markdown", sorted(resources)


async def test_convert(units: tuple[Wf, Any]) -> None:
    wf, server = units
    async with wf.http_client(server) as c:
        await wait_listed(c, "units__convert", LISTED_TIMEOUT)
        r = await ok(c, "units__convert", {"value": 1, "from": "mi", "to": "km"})
        assert r.structured_content == {"value": 1.609344, "unit": "km"}
        assert json.loads(content_text(r.content)) == r.structured_content
        r = await ok(c, "units__convert", {"value": 100, "from": "C", "to": "F"})
        assert r.structured_content == {"value": 212, "unit": "F"}
        # A failure the model can act on: an isError result that says what is wrong.
        with anyio.fail_after(OP_TIMEOUT):
            bad = await c.call_tool("units__convert", {"value": 1, "from": "kg", "to": "m"})
        assert bad.is_error is True
        assert content_text(bad.content) == "cannot convert mass (`kg`) to length (`m`)"


async def test_convert_many_reports_progress_and_asks_for_a_missing_unit(units: tuple[Wf, Any]) -> None:
    wf, server = units
    asked: list[types.ElicitRequestParams] = []

    async def elicit(_ctx: Any, params: types.ElicitRequestParams) -> types.ElicitResult:
        asked.append(params)
        return types.ElicitResult(action="accept", content={"to": "g"})

    steps: list[tuple[float, float | None, str | None]] = []

    async def on_progress(progress: float, total: float | None, message: str | None) -> None:
        steps.append((progress, total, message))

    async with wf.http_client(server, elicitation_callback=elicit) as c:
        await wait_listed(c, "units__convert_many", LISTED_TIMEOUT)
        r = await ok(c, "units__convert_many", {"values": [1, 2.5, 0], "from": "kg", "to": "lb"},
                     progress_callback=on_progress)
        out = json.loads(content_text(r.content))
        assert out["unit"] == "lb" and [round(v, 4) for v in out["values"]] == [2.2046, 5.5116, 0], out
        assert steps == [(1, 3, "1 of 3"), (2, 3, "2 of 3"), (3, 3, "3 of 3")], steps
        assert asked == []

        # No `to`: the component asks the caller, through wf, and uses the answer.
        r = await ok(c, "units__convert_many", {"values": [1, 2], "from": "kg"})
        assert json.loads(content_text(r.content)) == {"values": [1000, 2000], "unit": "g"}
        assert [p.message for p in asked] == ["Convert 2 values from kg to which unit?"]
        assert "g" in asked[0].requested_schema["properties"]["to"]["enum"]


async def test_prompt_and_resource(units: tuple[Wf, Any]) -> None:
    wf, server = units
    async with wf.http_client(server) as c:
        await wait_listed(c, "units__convert", LISTED_TIMEOUT)
        with anyio.fail_after(OP_TIMEOUT):
            prompt = await c.get_prompt("units__explain_unit", {"unit": "mi"})
            resource = await c.read_resource("units://table")
    assert prompt.description == "Explain mi"
    assert [(m.role, content_text(m.content)) for m in prompt.messages] == [
        ("user", "Explain the unit `mi` (length) to a newcomer, with one everyday example.")
    ]
    [contents] = resource.contents
    assert contents.mime_type == "text/markdown"
    assert contents.text.startswith("# Units\n") and "| `mi` | length | 1609.344 |" in contents.text, contents.text


async def run_workflow(units: tuple[Wf, Any], doc: dict[str, Any], *inputs: str) -> tuple[int, dict[str, Any]]:
    """`wf run` of `doc` beside the module's server, on its state dir: `wf run` checks a
    workflow against the catalog snapshot there and does not wait for a discovery that is
    still compiling the component, so the server's discovery must be done first."""
    wf, server = units
    async with wf.http_client(server) as c:
        await wait_listed(c, "units__convert", LISTED_TIMEOUT)
    path = wf.root / f"{doc['name']}.json"
    path.write_text(json.dumps(doc))
    args = [arg for i in inputs for arg in ("--input", i)]
    proc = wf.run("run", str(path), *args, "--config", str(wf.root / "wf.toml"), *wf.plugin_args(),
                  timeout=LISTED_TIMEOUT)
    try:
        return proc.returncode, json.loads(proc.stdout)
    except json.JSONDecodeError:
        pytest.fail(f"wf run exited {proc.returncode} without a JSON report:\n{proc.stderr}")


async def test_a_workflow_runs_the_node(units: tuple[Wf, Any]) -> None:
    doc = {
        "name": "distance",
        "inputs": {"type": "object", "properties": {"miles": {"type": "number"}}, "required": ["miles"]},
        "nodes": [
            {"id": "km", "use": "units.convert", "args": {"value": {"$ref": "inputs.miles"}, "from": "mi", "to": "km"}},
            {"id": "say", "use": "wf.std.template",
             "args": {"template": "{{miles}} mi is {{km}} km",
                      "values": {"miles": {"$ref": "inputs.miles"}, "km": {"$ref": "nodes.km.output.value"}}}},
        ],
        "outputs": {"km": {"$ref": "nodes.km.output.value"}, "text": {"$ref": "nodes.say.output.text"}},
    }
    code, out = await run_workflow(units, doc, "miles=26.2")
    assert code == 0 and out["status"] == "succeeded", out
    assert out["outputs"] == {"km": 42.1648128, "text": "26.2 mi is 42.1648128 km"}, out


async def test_a_bad_node_input_fails_the_run_with_the_components_message(units: tuple[Wf, Any]) -> None:
    doc = {
        "name": "mixed-up",
        "nodes": [{"id": "km", "use": "units.convert", "args": {"value": 3, "from": "kg", "to": "km"}}],
        "outputs": {"km": {"$ref": "nodes.km.output.value"}},
    }
    code, out = await run_workflow(units, doc)
    assert code != 0 and out["status"] == "failed", out
    assert "cannot convert mass (`kg`) to length (`km`)" in json.dumps(out), out
