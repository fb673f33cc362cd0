"""The example third-party plugin (examples/notes-plugin, `wf-notes`) loaded by
the real `wf` from a plugins folder and used with the official Python client,
the way docs/plugin-authoring.md tells a plugin author to check their build.

The plugin is built on its own (it is not part of wf's workspace):

    cargo build --manifest-path examples/notes-plugin/Cargo.toml --target-dir target/examples

and found through WF_EXAMPLE_PLUGIN (the built libwf_notes.so); without it
these tests are skipped.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

import anyio
import pytest
from mcp import Client, types

from conftest import Wf, all_prompts, all_resources, all_tools, content_text

pytestmark = pytest.mark.anyio

OP_TIMEOUT = 30
CAPS = ("add", "get", "list", "search", "delete")
TOOLS = {f"notes__{c}" for c in CAPS}


@pytest.fixture(scope="session")
def example_plugin() -> Path:
    value = os.environ.get("WF_EXAMPLE_PLUGIN")
    if not value:
        pytest.skip(
            "WF_EXAMPLE_PLUGIN is not set: build examples/notes-plugin with `cargo build "
            "--manifest-path examples/notes-plugin/Cargo.toml --target-dir target/examples` and set "
            "WF_EXAMPLE_PLUGIN to the built libwf_notes.so (tests/run does both)"
        )
    path = Path(value)
    if not path.is_file():
        pytest.fail(f"WF_EXAMPLE_PLUGIN={value} is not a file")
    return path


@pytest.fixture
def notes_wf(example_plugin: Path, wf: Wf) -> Wf:
    """An isolated wf whose plugins folder holds (a copy of) the example plugin."""
    wf.install_file(example_plugin)
    return wf


@pytest.fixture(params=["auto", "legacy"])
def mode(request: pytest.FixtureRequest) -> str:
    return request.param


# ---------------------------------------------------------------- helpers


async def call(c: Client, tool: str, arguments: dict[str, Any]) -> Any:
    """Calls a tool that must succeed; returns its structured content."""
    with anyio.fail_after(OP_TIMEOUT):
        result = await c.call_tool(tool, arguments)
    assert not result.is_error, f"{tool}: {content_text(result.content)}"
    assert result.structured_content is not None, tool
    # The text block mirrors the structured content (for clients that ignore it).
    assert json.loads(content_text(result.content)) == result.structured_content
    return result.structured_content


async def call_error(c: Client, tool: str, arguments: dict[str, Any]) -> str:
    """Calls a tool that must fail with an isError result; returns its text."""
    with anyio.fail_after(OP_TIMEOUT):
        result = await c.call_tool(tool, arguments)
    assert result.is_error is True, f"{tool} did not fail: {result}"
    return content_text(result.content)


def titles(output: dict[str, Any]) -> list[str]:
    return [n["title"] for n in output["notes"]]


async def read_text(c: Client, uri: str) -> str:
    with anyio.fail_after(OP_TIMEOUT):
        result = await c.read_resource(uri)
    assert len(result.contents) == 1, result
    content = result.contents[0]
    assert str(content.uri) == uri
    assert content.mime_type == "text/markdown"
    return content.text


async def prompt_text(c: Client, arguments: dict[str, str] | None = None) -> str:
    with anyio.fail_after(OP_TIMEOUT):
        result = await c.get_prompt("notes__summarize", arguments)
    assert len(result.messages) == 1, result
    assert result.messages[0].role == "user"
    return content_text(result.messages[0].content)


# ---------------------------------------------------------------- tests


def test_wf_plugins_loads_the_example(notes_wf: Wf) -> None:
    doc = notes_wf.plugins_json()
    ours = [p for p in doc["loaded"] if p["name"] == "wf-notes"]
    assert len(ours) == 1, doc
    assert ours[0]["kinds"] == ["notes"]
    assert Path(ours[0]["file"]).parent.resolve() == notes_wf.plugin_dir.resolve()
    assert not doc["refused"], doc["refused"]

    text = notes_wf.run("plugins", *notes_wf.plugin_args(), check=True).stdout
    assert "wf-notes" in text and "notes" in text, text


async def test_capabilities_are_listed(notes_wf: Wf, mode: str) -> None:
    async with notes_wf.stdio_client(mode) as c:
        with anyio.fail_after(OP_TIMEOUT):
            tools = {t.name: t for t in await all_tools(c)}
            prompts = {p.name: p for p in await all_prompts(c)}
            resources = {str(r.uri): r for r in await all_resources(c)}
            templates = (await c.list_resource_templates()).resource_templates

    assert TOOLS <= set(tools), sorted(tools)
    for name in TOOLS:
        tool = tools[name]
        assert tool.description, name
        assert tool.input_schema["type"] == "object", name
        assert tool.input_schema["additionalProperties"] is False, name
        assert tool.output_schema and tool.output_schema["type"] == "object", name
    assert tools["notes__add"].input_schema["required"] == ["title", "body"]
    assert tools["notes__list"].input_schema["required"] == []

    summarize = prompts.get("notes__summarize")
    assert summarize is not None, sorted(prompts)
    assert [(a.name, a.required) for a in summarize.arguments or []] == [("tag", False)]

    assert "notes://all" in resources, sorted(resources)
    assert resources["notes://all"].mime_type == "text/markdown"
    assert "notes://note/{id}" in [t.uri_template for t in templates], templates


async def test_tools_work_over_mcp(notes_wf: Wf, mode: str) -> None:
    async with notes_wf.stdio_client(mode) as c:
        assert await call(c, "notes__list", {}) == {"notes": []}

        added = await call(
            c, "notes__add", {"title": "Standup", "body": "Discuss the release blockers", "tags": ["work"]}
        )
        assert added == {
            "id": "n1",
            "note": {"id": "n1", "title": "Standup", "body": "Discuss the release blockers", "tags": ["work"]},
        }
        await call(c, "notes__add", {"title": "Dentist", "body": "call on monday", "tags": ["home"]})
        await call(c, "notes__add", {"title": "Release notes", "body": "draft them"})

        assert titles(await call(c, "notes__list", {})) == ["Standup", "Dentist", "Release notes"]
        assert titles(await call(c, "notes__list", {"tag": "work"})) == ["Standup"]
        assert titles(await call(c, "notes__search", {"query": "RELEASE"})) == ["Standup", "Release notes"]
        assert titles(await call(c, "notes__search", {"query": "Monday"})) == ["Dentist"]
        assert await call(c, "notes__search", {"query": "nothing like this"}) == {"notes": []}

        got = await call(c, "notes__get", {"id": "n2"})
        assert got == {"note": {"id": "n2", "title": "Dentist", "body": "call on monday", "tags": ["home"]}}

        assert await call(c, "notes__delete", {"id": "n2"}) == {"deleted": True}
        assert await call(c, "notes__delete", {"id": "n2"}) == {"deleted": False}
        assert titles(await call(c, "notes__list", {})) == ["Standup", "Release notes"]

        # Failures the model can act on come back as isError results that say what is wrong.
        text = await call_error(c, "notes__get", {"id": "n2"})
        assert "no note with id `n2`" in text, text
        text = await call_error(c, "notes__add", {"body": "no title"})
        assert "`title`" in text, text
        text = await call_error(c, "notes__add", {"title": "t", "body": "b", "tags": "work"})
        assert "`tags`" in text, text
        text = await call_error(c, "notes__search", {"query": ""})
        assert "`query`" in text, text

    # The plugin's `tracing` events reach wf's log, tagged with the plugin.
    log = notes_wf.logs[-1].read_text()
    added_lines = [line for line in log.splitlines() if "note added" in line]
    assert len(added_lines) == 3, log
    assert "wf-notes" in added_lines[0] and "id=n1" in added_lines[0], added_lines[0]


async def test_prompt_and_resources(notes_wf: Wf) -> None:
    async with notes_wf.stdio_client() as c:
        assert "there are none yet" in await prompt_text(c)
        assert "No notes." in await read_text(c, "notes://all")

        await call(c, "notes__add", {"title": "Standup", "body": "Discuss the release blockers", "tags": ["work"]})
        await call(c, "notes__add", {"title": "Dentist", "body": "call on monday", "tags": ["home"]})

        text = await prompt_text(c)
        assert "summarize" in text.lower(), text
        for needle in ("Standup", "Discuss the release blockers", "Dentist", "call on monday"):
            assert needle in text, f"{needle!r} not in {text!r}"
        text = await prompt_text(c, {"tag": "home"})
        assert "tagged `home`" in text and "Dentist" in text and "Standup" not in text, text

        text = await read_text(c, "notes://all")
        assert text.startswith("# Notes"), text
        assert text.index("## Standup") < text.index("## Dentist"), text
        text = await read_text(c, "notes://note/n2")
        assert text.startswith("## Dentist") and "call on monday" in text, text


async def test_notes_persist_across_serve_runs(notes_wf: Wf) -> None:
    async with notes_wf.stdio_client() as c:
        await call(c, "notes__add", {"title": "First", "body": "written by run 1", "tags": ["keep"]})
        await call(c, "notes__add", {"title": "Second", "body": "deleted by run 2"})

    files = list(notes_wf.state_dir.rglob("notes.json"))
    assert len(files) == 1, f"expected one notes.json under {notes_wf.state_dir}: {files}"
    assert [n["title"] for n in json.loads(files[0].read_text())["notes"]] == ["First", "Second"]

    async with notes_wf.stdio_client() as c:
        assert titles(await call(c, "notes__list", {})) == ["First", "Second"]
        assert "written by run 1" in await read_text(c, "notes://all")
        assert await call(c, "notes__delete", {"id": "n2"}) == {"deleted": True}
        # Ids are not reused after a restart.
        assert (await call(c, "notes__add", {"title": "Third", "body": "by run 2"}))["id"] == "n3"

    async with notes_wf.stdio_client() as c:
        assert titles(await call(c, "notes__list", {})) == ["First", "Third"]
        assert titles(await call(c, "notes__list", {"tag": "keep"})) == ["First"]


async def test_a_configured_second_notebook_is_separate(notes_wf: Wf) -> None:
    """`[sources.work] kind = "notes"` adds a second notebook next to the default one,
    with its own tools (`work__*`), data and resource URIs."""
    config = notes_wf.root / "wf.toml"
    config.write_text('[sources.work]\nkind = "notes"\n')
    async with notes_wf.stdio_client("auto", "--config", str(config)) as c:
        with anyio.fail_after(OP_TIMEOUT):
            tools = {t.name for t in await all_tools(c)}
            resources = {str(r.uri) for r in await all_resources(c)}
            templates = {t.uri_template for t in (await c.list_resource_templates()).resource_templates}
        assert TOOLS | {f"work__{n}" for n in CAPS} <= tools, sorted(tools)
        assert {"notes://all", "notes://work/all"} <= resources, sorted(resources)
        assert {"notes://note/{id}", "notes://work/note/{id}"} <= templates, templates

        await call(c, "work__add", {"title": "Roadmap", "body": "Q3 goals"})
        await call(c, "notes__add", {"title": "Groceries", "body": "milk"})
        assert titles(await call(c, "work__list", {})) == ["Roadmap"]
        assert titles(await call(c, "notes__list", {})) == ["Groceries"]

        # Both notebooks have a note n1; each URI reaches its own.
        assert (await read_text(c, "notes://note/n1")).startswith("## Groceries")
        assert (await read_text(c, "notes://work/note/n1")).startswith("## Roadmap")
        assert "Roadmap" in await read_text(c, "notes://work/all")
        assert "Roadmap" not in await read_text(c, "notes://all")


async def test_delete_asks_the_client_to_confirm(notes_wf: Wf) -> None:
    """The notes plugin asks for confirmation through wf (plugin API 1.2 elicitation): the
    client's form decides; a client that cannot be asked gets the delete it requested."""
    answers = ["decline", "confirm"]
    asked: list[str] = []

    async def elicit(_ctx: Any, params: types.ElicitRequestParams) -> types.ElicitResult:
        asked.append(params.message)
        if answers.pop(0) == "decline":
            return types.ElicitResult(action="decline")
        return types.ElicitResult(action="accept", content={"confirm": True})

    async with notes_wf.stdio_client("legacy", elicitation_callback=elicit) as c:
        await call(c, "notes__add", {"title": "Keep me", "body": "b"})
        refused = await call_error(c, "notes__delete", {"id": "n1"})
        assert "the user did not confirm" in refused, refused
        assert titles(await call(c, "notes__list", {})) == ["Keep me"]
        assert await call(c, "notes__delete", {"id": "n1"}) == {"deleted": True}
    assert asked == ['Delete note n1 "Keep me" from notes?'] * 2
