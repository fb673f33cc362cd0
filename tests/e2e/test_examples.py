"""Every example in examples/workflows runs, as the docs say (`wf run FILE
--input k=v`). A new example must be added to EXAMPLES, so none is left
untested."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from conftest import Wf

EXAMPLES_DIR = Path(__file__).resolve().parents[2] / "examples" / "workflows"

# example file -> (inputs, needs the example notes plugin, expected outputs)
EXAMPLES = {
    "greet.json": (
        {"name": "Ada"},
        False,
        {"greeting": "Hello, Ada!", "packed": {"greeting": "Hello, Ada!", "source": "wf.std"}},
    ),
    "notes-digest.json": (
        {"title": "Milk run", "body": "buy oat milk", "topic": "milk"},
        True,
        {"report": "First note about milk: Milk run", "added": "n1"},
    ),
}


def test_every_example_is_listed() -> None:
    assert sorted(p.name for p in EXAMPLES_DIR.glob("*.json")) == sorted(EXAMPLES)


@pytest.mark.parametrize("name", sorted(EXAMPLES))
def test_example_runs(name: str, wf: Wf) -> None:
    inputs, needs_notes, expected = EXAMPLES[name]
    if needs_notes:
        plugin = os.environ.get("WF_EXAMPLE_PLUGIN")
        if not plugin:
            pytest.skip("WF_EXAMPLE_PLUGIN is not set (tests/run builds examples/notes-plugin and sets it)")
        wf.install_file(Path(plugin))
    args = ["run", str(EXAMPLES_DIR / name), "--plugins", str(wf.plugin_dir), "--state-dir", str(wf.state_dir)]
    for k, v in inputs.items():
        args += ["--input", f"{k}={v}"]
    r = wf.run(*args)
    assert r.returncode == 0, r.stderr
    out = json.loads(r.stdout)
    assert out["status"] == "succeeded", out
    assert out["outputs"] == expected
    # Live progress: a line per node that finished.
    doc = json.loads((EXAMPLES_DIR / name).read_text())
    for node in doc["nodes"]:
        assert any(line.startswith("✓") and f" {node['id']} " in line for line in r.stderr.splitlines()), (node["id"], r.stderr)
