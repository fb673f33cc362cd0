"""`wf run FILE` (live progress on stderr, outputs JSON on stdout) and `wf runs`."""

from __future__ import annotations

import json
import re
import signal
import subprocess
import time
from pathlib import Path
from typing import Any

from conftest import REPO, Wf
from planner_support import fx_config

GREET = REPO / "examples" / "workflows" / "greet.json"
QUIET = ("--log-level", "error")

# An upstream that says hello and then never lists its tools.
SLOW_LISTING = """
import json, sys, time
hello = json.loads(sys.stdin.readline())
result = {"protocolVersion": "2025-11-25", "capabilities": {"tools": {}}, "serverInfo": {"name": "slow", "version": "1"}}
print(json.dumps({"jsonrpc": "2.0", "id": hello["id"], "result": result}), flush=True)
for line in sys.stdin:
    pass
time.sleep(60)
"""


def stdout_json(proc: subprocess.CompletedProcess[str]) -> dict[str, Any]:
    try:
        return json.loads(proc.stdout)
    except json.JSONDecodeError as e:
        raise AssertionError(f"stdout is not one JSON document ({e}):\n{proc.stdout}\n--- stderr\n{proc.stderr}")


def runs_json(wf: Wf, *extra: str) -> list[dict[str, Any]]:
    proc = wf.run("runs", "--state-dir", str(wf.state_dir), "--json", *extra)
    assert proc.returncode == 0, proc.stderr
    return json.loads(proc.stdout)


def write(wf: Wf, name: str, doc: dict[str, Any]) -> Path:
    path = wf.root / name
    path.write_text(json.dumps(doc))
    return path


def test_run_greet_prints_progress_and_outputs(wf: Wf) -> None:
    proc = wf.run("run", str(GREET), "--input", "name=Ada", *wf.plugin_args(), *QUIET)
    assert proc.returncode == 0, proc.stderr
    out = stdout_json(proc)
    assert out["status"] == "succeeded" and out["error"] is None
    assert out["outputs"] == {"greeting": "Hello, Ada!", "packed": {"greeting": "Hello, Ada!", "source": "wf.std"}}
    assert re.fullmatch(r"run-[0-9a-f]+", out["run_id"])

    lines = proc.stderr.splitlines()
    # The run's id, then one line per node state change: running (…), then succeeded (✓ with ms).
    assert f"run {out['run_id']}" in lines
    for node, capability in (("render", "wf.std.template"), ("check", "wf.std.assert"), ("pack", "wf.std.merge")):
        running = [l for l in lines if re.fullmatch(rf"… {node}\s+{re.escape(capability)}\s+running", l)]
        done = [l for l in lines if re.fullmatch(rf"✓ {node}\s+{re.escape(capability)}\s+succeeded \d+ ms", l)]
        assert len(running) == 1 and len(done) == 1, f"progress of {node}:\n{proc.stderr}"
        assert lines.index(running[0]) < lines.index(done[0])
    # `check` runs after `render` (its `after`).
    assert lines.index(next(l for l in lines if l.startswith("✓ render"))) < lines.index(
        next(l for l in lines if l.startswith("… check"))
    )
    # Nothing but the JSON on stdout.
    assert "…" not in proc.stdout and "✓" not in proc.stdout

    runs = runs_json(wf)
    assert [(r["id"], r["status"], r["workflow"]) for r in runs] == [(out["run_id"], "succeeded", "greet")]
    assert runs[0]["origin"] == {"kind": "file", "path": str(GREET)}
    assert runs[0]["inputs"] == {"name": "Ada"} and runs[0]["outputs"] == out["outputs"]
    # A run from the command line is the operator's: principal `local`.
    assert runs[0]["principal"] == "local"

    table = wf.run("runs", "--state-dir", str(wf.state_dir))
    assert table.returncode == 0, table.stderr
    header, *rows = table.stdout.splitlines()
    assert header.split() == ["run", "status", "workflow", "principal", "ms", "error"]
    assert len(rows) == 1 and rows[0].split()[:4] == [out["run_id"], "succeeded", "greet", "local"]


def test_input_values_are_json_when_they_parse(wf: Wf) -> None:
    doc = {
        "name": "echo-inputs",
        "inputs": {"type": "object", "properties": {"n": {"type": "integer"}, "s": {"type": "string"}}},
        "nodes": [{"id": "all", "use": "wf.std.passthrough", "args": {"value": {"n": {"$ref": "inputs.n"}, "s": {"$ref": "inputs.s"}}}}],
        "outputs": {"v": {"$ref": "nodes.all.output.value"}},
    }
    path = write(wf, "inputs.json", doc)
    proc = wf.run("run", str(path), "--input", "n=42", "--input", "s=a=b c", *wf.plugin_args(), *QUIET)
    assert proc.returncode == 0, proc.stderr
    assert stdout_json(proc)["outputs"] == {"v": {"n": 42, "s": "a=b c"}}
    # A value of the wrong type is refused before anything runs (exit 2).
    bad = wf.run("run", str(path), "--input", "n=forty", *wf.plugin_args(), *QUIET)
    assert bad.returncode == 2, bad.stderr
    assert 'input "n" must be integer' in bad.stderr and bad.stdout == ""


def test_missing_required_input_exits_2(wf: Wf) -> None:
    proc = wf.run("run", str(GREET), *wf.plugin_args(), *QUIET)
    assert proc.returncode == 2, proc.stderr
    assert 'missing required input "name"' in proc.stderr
    assert proc.stdout == ""
    assert runs_json(wf) == []


def test_workflow_with_problems_exits_2_listing_them(wf: Wf) -> None:
    doc = {
        "name": "broken",
        "nodes": [
            {"id": "a", "use": "wf.std.nope"},
            {"id": "b", "use": "wf.std.template", "args": {"template": "x", "valuez": {}}},
            {"id": "c", "use": "wf.std.passthrough", "args": {"value": {"$ref": "nodes.d.output"}}},
            {"id": "d", "use": "wf.std.const", "args": {"value": 1}, "after": ["c"]},
        ],
        "outputs": {"x": {"$ref": "nodes.z.output"}},
    }
    path = write(wf, "broken.json", doc)
    proc = wf.run("run", str(path), *wf.plugin_args(), *QUIET)
    assert proc.returncode == 2, proc.stderr
    assert proc.stdout == ""
    listed = [
        m.groups() for l in proc.stderr.splitlines() if (m := re.fullmatch(rf"{re.escape(str(path))}: (\S+) \[(\w+)\]: .+", l))
    ]
    assert sorted(listed) == sorted(
        [
            ("nodes[0].use", "unknown_capability"),
            ("nodes[1].args.values", "missing_argument"),
            ("nodes[1].args.valuez", "unknown_argument"),
            ("nodes[2]", "cycle"),
            ("outputs.x", "dangling_output"),
        ]
    ), proc.stderr
    assert "wf run: the workflow has 5 problem(s); nothing ran" in proc.stderr
    assert runs_json(wf) == []


def test_not_a_workflow_file(wf: Wf) -> None:
    path = wf.root / "nope.json"
    path.write_text("{ not json")
    proc = wf.run("run", str(path), *wf.plugin_args(), *QUIET)
    assert proc.returncode != 0 and "not JSON" in proc.stderr
    wrong = write(wf, "wrong.json", {"nodes": [{"id": "a", "use": "x.y", "bogus": 1}]})
    proc = wf.run("run", str(wrong), *wf.plugin_args(), *QUIET)
    assert proc.returncode != 0 and "not a workflow document" in proc.stderr and "bogus" in proc.stderr
    missing = wf.run("run", str(wf.root / "absent.json"), *wf.plugin_args(), *QUIET)
    assert missing.returncode != 0 and "absent.json" in missing.stderr


def test_failed_run_exits_1(wf: Wf) -> None:
    doc = {
        "name": "fails",
        "nodes": [
            {"id": "ok", "use": "wf.std.const", "args": {"value": 1}},
            {"id": "boom", "use": "wf.std.runtime_error", "args": {"code": "e42", "message": "on purpose"}, "after": ["ok"]},
            {"id": "never", "use": "wf.std.const", "args": {"value": 2}, "after": ["boom"]},
        ],
    }
    path = write(wf, "fails.json", doc)
    proc = wf.run("run", str(path), *wf.plugin_args(), *QUIET)
    assert proc.returncode == 1, proc.stderr
    out = stdout_json(proc)
    assert out["status"] == "failed" and out["outputs"] is None
    assert 'node "boom" (wf.std.runtime_error) failed' in out["error"] and "e42: on purpose" in out["error"]
    assert any(re.fullmatch(r"✗ boom\s+wf\.std\.runtime_error\s+failed \d+ ms: .*e42: on purpose.*", l) for l in proc.stderr.splitlines()), proc.stderr
    assert "never" not in proc.stderr
    failed = runs_json(wf, "--status", "failed")
    assert [r["id"] for r in failed] == [out["run_id"]]
    assert runs_json(wf, "--status", "succeeded") == []


def test_run_with_a_config_uses_its_sources(wf: Wf, fixture_upstream_bin: Path) -> None:
    """A workflow on an mcp source from the config: its nodes share one upstream session."""
    doc = {
        "name": "count",
        "nodes": [
            {"id": "a", "use": "fx.increment", "args": {"by": 2}},
            {"id": "b", "use": "fx.increment", "after": ["a"]},
            {"id": "c", "use": "fx.get_count", "after": ["b"]},
        ],
        "outputs": {"count": {"$ref": "nodes.c.output.count"}},
    }
    config = fx_config(wf, fixture_upstream_bin)
    path = write(wf, "count.json", doc)
    proc = wf.run("run", str(path), "--config", str(config), *wf.plugin_args(), *QUIET)
    assert proc.returncode == 0, proc.stderr
    assert stdout_json(proc)["outputs"] == {"count": 3}


def test_killed_run_is_interrupted_at_the_next_start(wf: Wf) -> None:
    doc = {"name": "long", "nodes": [{"id": "nap", "use": "wf.std.sleep", "args": {"ms": 60000}}]}
    path = write(wf, "long.json", doc)
    log = wf.new_log("wf-run-killed")
    with log.open("w") as err:
        proc = subprocess.Popen(
            [str(wf.bin), "run", str(path), *wf.plugin_args(), *QUIET],
            cwd=wf.root,
            env=wf.env(),
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
            stderr=err,
        )
    try:
        deadline = time.monotonic() + 30
        while "… nap" not in log.read_text():
            assert proc.poll() is None, f"wf run exited {proc.returncode}:\n{log.read_text()}"
            assert time.monotonic() < deadline, f"no progress line:\n{log.read_text()}"
            time.sleep(0.05)
        run_id = re.search(r"^run (run-\S+)$", log.read_text(), re.M).group(1)  # type: ignore[union-attr]
        assert {r["id"]: r["status"] for r in runs_json(wf)} == {run_id: "running"}
    finally:
        proc.send_signal(signal.SIGKILL)
        proc.wait(timeout=10)
    # kill -9 ran no shutdown code: the record still says running (`wf runs` only reads).
    assert {r["id"]: r["status"] for r in runs_json(wf)} == {run_id: "running"}

    # The next start of wf with this state dir (here another `wf run`) marks it.
    again = wf.run("run", str(GREET), "--input", "name=Bo", *wf.plugin_args(), *QUIET)
    assert again.returncode == 0, again.stderr
    runs = {r["id"]: r for r in runs_json(wf)}
    assert runs[run_id]["status"] == "interrupted"
    assert runs[run_id]["error"] == "the host stopped while the run was in progress"
    assert runs[stdout_json(again)["run_id"]]["status"] == "succeeded"


def test_a_source_still_listing_when_the_run_ends_is_not_a_warning(wf: Wf) -> None:
    """`wf run` of wf.std nodes with a configured upstream that answers
    `initialize` and never `tools/list`: the run does not wait for it, and its
    discovery, cut short by the run's own shutdown, is not reported as a
    failure (it was: "discovery failed: … Transport closed")."""
    silent = wf.root / "silent.py"
    silent.write_text(SLOW_LISTING)
    config = wf.root / "silent.toml"
    config.write_text(f'[sources.slow]\ncommand = "python3"\nargs = ["{silent}"]\n')
    proc = wf.run(
        "run", str(GREET), "--input", "name=Ada", "--config", str(config), *wf.plugin_args(),
        env={"WF_LOG": "warn"}, timeout=60,
    )
    assert proc.returncode == 0, proc.stderr
    assert stdout_json(proc)["outputs"]["greeting"] == "Hello, Ada!"
    assert "discovery failed" not in proc.stderr, proc.stderr
    assert " WARN " not in proc.stderr and "ERROR" not in proc.stderr, proc.stderr
