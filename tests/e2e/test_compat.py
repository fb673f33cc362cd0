"""The ABI compatibility promise (docs/abi-evolution.md), tested with real
builds of two wf-plugin-api versions:

- tests/compat/plugin-v1_0 is built against wf-plugin-api 1.0.0 (a frozen copy
  of the previous minor release, tests/compat/wf-plugin-api-1.0.0) and must
  load and work in today's host (1.2.x) — including when the host sends it an
  operation 1.0 does not know, and when it reports a lost session in the
  pre-1.2 words (`upstream` + "upstream session restarted; state lost"), which
  the host must still read as the typed `state_lost`;
- the bad-version fixture claims 2.0.0 and must be refused with its one line.

tests/run builds the 1.0 plugin into target/compat and sets WF_COMPAT_PLUGIN.
"""

from __future__ import annotations

import json
import os
import sqlite3
from pathlib import Path

import anyio
import pytest
from mcp import Client, StdioServerParameters

from conftest import Wf, content_text
from caller_support import Answerer

pytestmark = pytest.mark.anyio


@pytest.fixture(scope="session")
def compat_plugin() -> Path:
    value = os.environ.get("WF_COMPAT_PLUGIN")
    if not value:
        pytest.skip("WF_COMPAT_PLUGIN is not set (tests/run builds tests/compat/plugin-v1_0 and sets it)")
    path = Path(value)
    assert path.is_file(), f"WF_COMPAT_PLUGIN={value} is not a file"
    return path


@pytest.fixture(params=["process", "in_process"])
def compat_wf(compat_plugin: Path, wf: Wf, request: pytest.FixtureRequest) -> Wf:
    """The 1.0 plugin in either isolation (issue 32): a plugin dropped into a
    folder runs in a child by default; the config can load it into wf."""
    wf.install_file(compat_plugin)
    config = wf.write_config(f'[plugins.compat-v1-0]\nisolation = "{request.param}"\n', "compat.toml")
    base = wf.plugin_args()
    wf.plugin_args = lambda: [*base, "--config", str(config)]  # type: ignore[method-assign]
    wf.isolation = request.param  # type: ignore[attr-defined]
    return wf


def test_a_previous_minor_plugin_loads(compat_wf: Wf) -> None:
    doc = compat_wf.plugins_json()
    ours = [p for p in doc["loaded"] if p["name"] == "compat-v1-0"]
    assert len(ours) == 1, doc
    assert ours[0]["api_version"] == "1.0.0"
    assert ours[0]["isolation"] == compat_wf.isolation  # type: ignore[attr-defined]
    host_api = doc["host_api"]
    major, minor = (int(x) for x in host_api.split(".")[:2])
    assert (major, minor) > (1, 0), f"the host must be newer than the plugin for this test to mean anything: {host_api}"
    assert doc["refused"] == [], doc["refused"]


def test_an_incompatible_plugin_is_refused_with_one_line(compat_wf: Wf) -> None:
    compat_wf.install("bad-version")
    doc = compat_wf.plugins_json("--allow-refused")  # refused: exit 1 without it
    reasons = [r["reason"] for r in doc["refused"]]
    assert len(reasons) == 1, doc
    assert "incompatible wf-plugin-api" in reasons[0] and "2.0.0" in reasons[0], reasons[0]
    assert doc["supported_api"] in reasons[0], reasons[0]
    assert "\n" not in reasons[0]
    assert any(p["name"] == "compat-v1-0" for p in doc["loaded"])


@pytest.mark.parametrize("mode", ["auto", "legacy"])
async def test_a_previous_minor_plugin_serves_its_tools(compat_wf: Wf, mode: str) -> None:
    params = StdioServerParameters(
        command=str(compat_wf.bin),
        args=["serve", *compat_wf.plugin_args()],
        env=compat_wf.stdio_env(),
        cwd=str(compat_wf.root),
    )
    with anyio.fail_after(60):
        async with Client(params, mode=mode) as c:
            names = {t.name for t in (await c.list_tools()).tools}
            assert "compat__hello" in names and "wf_std__passthrough" in names, names
            r = await c.call_tool("compat__hello", {"name": "Ada"})
            assert not r.is_error, content_text(r.content)
            assert r.structured_content == {"greeting": "hello from api 1.0, Ada"}


async def test_a_previous_minor_plugin_works_behind_a_1_2_call_context(compat_wf: Wf) -> None:
    """Since 1.2 the host's call context has `ask_caller` and routes it to a client that
    can answer; a 1.0 plugin sees its older, shorter vtable and works unchanged."""
    a = Answerer()
    params = StdioServerParameters(
        command=str(compat_wf.bin),
        args=["serve", *compat_wf.plugin_args()],
        env=compat_wf.stdio_env(),
        cwd=str(compat_wf.root),
    )
    with anyio.fail_after(60):
        async with Client(params, mode="legacy", **a.callbacks()) as c:
            r = await c.call_tool("compat__hello", {"name": "Grace"})
            assert not r.is_error, content_text(r.content)
            assert r.structured_content == {"greeting": "hello from api 1.0, Grace"}
    assert a.elicitations == [] and a.samplings == [] and a.roots_asked == 0


def test_a_previous_minor_plugin_runs_in_a_workflow_with_a_lease(compat_wf: Wf) -> None:
    # `sessions: run` makes the 1.1 engine send OpenLease, an operation the
    # 1.0 plugin predates: it answers `unsupported` and the run goes on.
    doc = {
        "name": "compat",
        "sessions": {"compat": "run"},
        "nodes": [{"id": "h", "use": "compat.hello", "args": {"name": "Ada"}}],
        "outputs": {"greeting": {"$ref": "nodes.h.output.greeting"}},
    }
    path = compat_wf.root / "compat.json"
    path.write_text(json.dumps(doc))
    r = compat_wf.run("run", str(path), *compat_wf.plugin_args())
    assert r.returncode == 0, r.stderr
    out = json.loads(r.stdout)
    assert out["status"] == "succeeded", out
    assert out["outputs"] == {"greeting": "hello from api 1.0, Ada"}


def test_a_previous_minor_plugins_state_lost_is_still_understood(compat_wf: Wf) -> None:
    # `compat.lost` answers `upstream` with the STATE_LOST message, as a 1.1
    # source did. The 1.2 host reads it as a lost session: it is not retried
    # (attempts 1 of 3) and the run record keeps the code `state_lost`.
    doc = {
        "name": "compat-lost",
        "nodes": [{"id": "l", "use": "compat.lost", "retry": {"attempts": 3, "backoff_ms": 10}}],
    }
    path = compat_wf.root / "compat-lost.json"
    path.write_text(json.dumps(doc))
    r = compat_wf.run("run", str(path), *compat_wf.plugin_args())
    assert r.returncode == 1, (r.returncode, r.stderr)
    out = json.loads(r.stdout)
    assert out["status"] == "failed", out
    assert "upstream session restarted; state lost" in out["error"], out
    # The record as stored, read from the state database itself.
    db = sqlite3.connect(compat_wf.state_dir / "wf.db")
    try:
        rows = db.execute(
            "SELECT status, error_code, attempts, error FROM node_runs WHERE run_id = ?", (out["run_id"],)
        ).fetchall()
    finally:
        db.close()
    assert len(rows) == 1, rows
    status, code, attempts, error = rows[0]
    assert (status, code, attempts) == ("failed", "state_lost", 1), rows[0]
    assert error == 'upstream session restarted; state lost (source "compat")', error


def test_an_upstream_error_that_is_not_state_lost_keeps_its_code(compat_wf: Wf) -> None:
    # The control: the same plugin's ordinary `upstream` error is not read as a
    # lost session: it is retried as configured and recorded as `upstream`.
    doc = {
        "name": "compat-down",
        "nodes": [{"id": "d", "use": "compat.down", "retry": {"attempts": 2, "backoff_ms": 10}}],
    }
    path = compat_wf.root / "compat-down.json"
    path.write_text(json.dumps(doc))
    r = compat_wf.run("run", str(path), *compat_wf.plugin_args())
    assert r.returncode == 1, (r.returncode, r.stderr)
    out = json.loads(r.stdout)
    db = sqlite3.connect(compat_wf.state_dir / "wf.db")
    try:
        row = db.execute(
            "SELECT status, error_code, attempts, error FROM node_runs WHERE run_id = ?", (out["run_id"],)
        ).fetchone()
    finally:
        db.close()
    assert row[:3] == ("failed", "upstream", 2), row
    assert "upstream unreachable" in row[3], row
