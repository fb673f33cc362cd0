"""Pinned plugin files (docs/operator-manual.md, "Pinning plugins"):
`wf plugins --pin FILE` records the file's sha256, name and version in
plugins.lock beside the config; a pinned file swapped for another is refused
with one line naming both hashes, before it is loaded, and the other plugins
load and serve."""

from __future__ import annotations

import hashlib
import json
import shutil

import anyio
import pytest

from conftest import Wf, all_tools

pytestmark = pytest.mark.anyio


def sha256(path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


@pytest.fixture
def pinned(wf: Wf):
    """Two fixture plugins, one of them (call-panics) pinned; returns its file."""
    config = wf.write_config("")
    panicky = wf.install("call-panics")
    wf.install("cancel")
    r = wf.run("plugins", "--config", str(config), *wf.plugin_args(), "--pin", str(panicky))
    assert r.returncode == 0, r.stderr
    return config, panicky


def test_pin_records_the_hash_name_and_version(wf: Wf, pinned) -> None:
    config, panicky = pinned
    r = wf.run("plugins", "--config", str(config), *wf.plugin_args(), "--pin", str(panicky))
    assert r.returncode == 0, r.stderr
    want = sha256(panicky)
    assert f"pinned fixture-call-panics 0.1.0 sha256:{want} {panicky.resolve()}" in r.stdout, r.stdout
    lock = config.parent / "plugins.lock"
    text = lock.read_text()
    assert text.startswith("#"), text
    assert f'sha256 = "{want}"' in text and 'name = "fixture-call-panics"' in text, text
    assert text.count("[[pin]]") == 1, "pinning again replaces the pin"
    doc = wf.plugins_json("--config", str(config))
    by_name = {p["name"]: p for p in doc["loaded"]}
    assert by_name["fixture-call-panics"]["pinned"] is True, doc
    assert by_name["fixture-cancel"]["pinned"] is False, doc


def test_pin_refuses_a_file_in_no_plugin_folder(wf: Wf) -> None:
    config = wf.write_config("")
    stray = wf.root / "elsewhere" / "libx.so"
    stray.parent.mkdir()
    shutil.copy2(wf.fixture_lib("cancel"), stray)
    r = wf.run("plugins", "--config", str(config), *wf.plugin_args(), "--pin", str(stray))
    assert r.returncode == 1, r.stdout
    assert "in no plugin folder" in r.stderr, r.stderr


async def test_a_swapped_pinned_file_is_refused_and_the_others_load(wf: Wf, pinned) -> None:
    config, panicky = pinned
    before = sha256(panicky)
    # Another plugin's build under the pinned name: its constructor fails
    # loudly, so a refusal that names the pin proves it was never loaded.
    shutil.copy2(wf.fixture_lib("ctor-fails"), panicky)
    after = sha256(panicky)
    assert before != after
    doc = wf.plugins_json("--config", str(config), "--allow-refused")
    refused = [r for r in doc["refused"] if r["file"] == str(panicky)]
    assert len(refused) == 1, doc["refused"]
    reason = refused[0]["reason"]
    assert before in reason and after in reason, reason
    assert "pinned file changed" in reason and "\n" not in reason, reason
    assert "constructor" not in reason, reason
    names = {p["name"] for p in doc["loaded"]}
    assert "fixture-cancel" in names and "fixture-call-panics" not in names, names
    # `wf plugins` without --allow-refused exits 1 on it.
    assert wf.run("plugins", "--config", str(config), *wf.plugin_args()).returncode == 1

    # And `wf serve` serves the others.
    with anyio.fail_after(60):
        async with wf.stdio_client("auto", "--config", str(config)) as c:
            tools = {t.name for t in await all_tools(c)}
    assert any(t.startswith("cancel__") for t in tools), tools
    assert not any(t.startswith("panicky__") for t in tools), tools
    lock = json.dumps((config.parent / "plugins.lock").read_text())
    assert before in lock, "the lock keeps the pinned hash until the operator pins again"
