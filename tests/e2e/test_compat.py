"""The ABI compatibility promise (docs/abi-evolution.md), tested with real
builds of older wf-plugin-api versions (one plugin per minor, each built
against a frozen copy of its API in tests/compat), in every isolation mode
(ISOLATIONS):

- tests/compat/plugin-v1_0 is built against wf-plugin-api 1.0.0 (a frozen copy,
  tests/compat/wf-plugin-api-1.0.0) and must load and work in today's host
  (1.7.x) — including when the host sends it an
  operation 1.0 does not know, and when it reports a lost session in the
  pre-1.2 words (`upstream` + "upstream session restarted; state lost"), which
  the host must still read as the typed `state_lost`;
- tests/compat/plugin-v1_1 (wf-plugin-api 1.1.0) uses what 1.1 added: its
  source keeps a counter per session, shared and per lease, and a workflow with
  `sessions: run` runs its nodes on one lease;
- tests/compat/plugin-v1_2 (wf-plugin-api 1.2.0) uses what 1.2 added: a tool
  that asks the client (elicitation) and a prompt argument that completes;
- tests/compat/plugin-v1_3 (wf-plugin-api 1.3.0) uses what 1.3 added: a call
  served as a task (fetched and cancelled through wf), and its older glue answers
  1.4's `tasks/update` unsupported;
- tests/compat/plugin-v1_4 (wf-plugin-api 1.4.0) uses what 1.4 added: a task
  that takes input through `tasks/update`; isolated, its older glue answers 1.5's
  `call_lane` unsupported and wf-plugin-host serves its calls itself;
- tests/compat/plugin-v1_5 (wf-plugin-api 1.5.0) uses what 1.5 added: isolated,
  its own runtime serves its calls over the call lane; and it meets 1.6's rounds:
  it asks two questions one at a time (it has no `ask_round`), which a 2026-07-28
  client gets as two rounds of wf's own keys and a 2025-11-25 client as two requests;
- tests/compat/plugin-v1_6 (wf-plugin-api 1.6.0) uses what 1.6 added: it asks two
  questions as one round (`ask_round`), which a 2026-07-28 client gets as one round
  under the plugin's keys and a 2025-11-25 client as two requests; and it meets 1.7's
  descriptor watch (`next_watch`), which its older glue answers unsupported;
- the bad-version fixture claims 2.0.0 and must be refused with its one line.

tests/run builds the compat plugins into target/compat and sets
WF_COMPAT_PLUGIN (1.0), WF_COMPAT_PLUGIN_V1_1, WF_COMPAT_PLUGIN_V1_2,
WF_COMPAT_PLUGIN_V1_3, WF_COMPAT_PLUGIN_V1_4, WF_COMPAT_PLUGIN_V1_5 and
WF_COMPAT_PLUGIN_V1_6.
"""

from __future__ import annotations

import json
import os
import sqlite3
from pathlib import Path

import anyio
import pytest
from mcp import Client, StdioServerParameters

import mcp.types as types

from conftest import Wf, content_text
from caller_support import ANSWER_NAME, Answerer

pytestmark = pytest.mark.anyio

# Every compat test runs in each of these plugin isolation modes (issue #32).
ISOLATIONS = ["in_process", "process"]


def compat_file(variable: str, crate: str) -> Path:
    value = os.environ.get(variable)
    if not value:
        pytest.skip(f"{variable} is not set (tests/run builds tests/compat/{crate} and sets it)")
    path = Path(value)
    assert path.is_file(), f"{variable}={value} is not a file"
    return path


@pytest.fixture(scope="session")
def compat_plugin() -> Path:
    return compat_file("WF_COMPAT_PLUGIN", "plugin-v1_0")


def isolate(wf: Wf, isolation: str, files: list[Path], names: list[str]) -> Path:
    """The config that runs the plugins in `isolation`; returns its path.
    In process: the files are pinned (a pinned plugin runs in process by
    default; an unpinned third-party one would not)."""
    if isolation == "in_process":
        text = ""
    else:
        text = "".join(f'[plugins.{n}]\nisolation = "{isolation}"\n' for n in names)
    config = wf.write_config(text)
    if isolation == "in_process":
        pins = [a for f in files for a in ("--pin", str(f))]
        r = wf.run("plugins", "--config", str(config), *wf.plugin_args(), *pins)
        assert r.returncode == 0, r.stderr
    return config


class CompatWf:
    """A wf with compat plugins installed, run in one isolation mode."""

    def __init__(self, wf: Wf, config: Path, isolation: str) -> None:
        self.wf = wf
        self.config = config
        self.isolation = isolation
        self.bin = wf.bin
        self.root = wf.root
        self.state_dir = wf.state_dir
        self.plugin_dir = wf.plugin_dir

    def args(self) -> list[str]:
        return ["--config", str(self.config), *self.wf.plugin_args()]

    def plugins_json(self, *extra: str) -> dict:
        return self.wf.plugins_json("--config", str(self.config), *extra)

    def install(self, crate_dir: str) -> Path:
        return self.wf.install(crate_dir)

    def run_workflow(self, doc: dict, name: str):
        path = self.root / name
        path.write_text(json.dumps(doc))
        return self.wf.run("run", str(path), *self.args())

    def params(self) -> StdioServerParameters:
        return StdioServerParameters(
            command=str(self.bin), args=["serve", *self.args()], env=self.wf.stdio_env(), cwd=str(self.root)
        )


@pytest.fixture(params=ISOLATIONS)
def compat_wf(request: pytest.FixtureRequest, compat_plugin: Path, wf: Wf) -> CompatWf:
    installed = wf.install_file(compat_plugin)
    return CompatWf(wf, isolate(wf, request.param, [installed], ["compat-v1-0"]), request.param)


def test_a_previous_minor_plugin_loads(compat_wf: CompatWf) -> None:
    doc = compat_wf.plugins_json()
    ours = [p for p in doc["loaded"] if p["name"] == "compat-v1-0"]
    assert len(ours) == 1, doc
    assert ours[0]["api_version"] == "1.0.0"
    assert ours[0]["isolation"] == compat_wf.isolation
    host_api = doc["host_api"]
    major, minor = (int(x) for x in host_api.split(".")[:2])
    assert (major, minor) > (1, 0), f"the host must be newer than the plugin for this test to mean anything: {host_api}"
    assert doc["refused"] == [], doc["refused"]


def test_an_incompatible_plugin_is_refused_with_one_line(compat_wf: CompatWf) -> None:
    compat_wf.install("bad-version")
    doc = compat_wf.plugins_json("--allow-refused")  # refused: exit 1 without it
    reasons = [r["reason"] for r in doc["refused"]]
    assert len(reasons) == 1, doc
    assert "incompatible wf-plugin-api" in reasons[0] and "2.0.0" in reasons[0], reasons[0]
    assert doc["supported_api"] in reasons[0], reasons[0]
    assert "\n" not in reasons[0]
    assert any(p["name"] == "compat-v1-0" for p in doc["loaded"])


@pytest.mark.parametrize("mode", ["auto", "legacy"])
async def test_a_previous_minor_plugin_serves_its_tools(compat_wf: CompatWf, mode: str) -> None:
    params = compat_wf.params()
    with anyio.fail_after(60):
        async with Client(params, mode=mode) as c:
            names = {t.name for t in (await c.list_tools()).tools}
            assert "compat__hello" in names and "wf_std__passthrough" in names, names
            r = await c.call_tool("compat__hello", {"name": "Ada"})
            assert not r.is_error, content_text(r.content)
            assert r.structured_content == {"greeting": "hello from api 1.0, Ada"}


async def test_a_previous_minor_plugin_works_behind_a_1_2_call_context(compat_wf: CompatWf) -> None:
    """Since 1.2 the host's call context has `ask_caller` and routes it to a client that
    can answer; a 1.0 plugin sees its older, shorter vtable and works unchanged."""
    a = Answerer()
    params = compat_wf.params()
    with anyio.fail_after(60):
        async with Client(params, mode="legacy", **a.callbacks()) as c:
            r = await c.call_tool("compat__hello", {"name": "Grace"})
            assert not r.is_error, content_text(r.content)
            assert r.structured_content == {"greeting": "hello from api 1.0, Grace"}
    assert a.elicitations == [] and a.samplings == [] and a.roots_asked == 0


def test_a_previous_minor_plugin_runs_in_a_workflow_with_a_lease(compat_wf: CompatWf) -> None:
    # `sessions: run` makes the 1.1 engine send OpenLease, an operation the
    # 1.0 plugin predates: it answers `unsupported` and the run goes on.
    doc = {
        "name": "compat",
        "sessions": {"compat": "run"},
        "nodes": [{"id": "h", "use": "compat.hello", "args": {"name": "Ada"}}],
        "outputs": {"greeting": {"$ref": "nodes.h.output.greeting"}},
    }
    r = compat_wf.run_workflow(doc, "compat.json")
    assert r.returncode == 0, r.stderr
    out = json.loads(r.stdout)
    assert out["status"] == "succeeded", out
    assert out["outputs"] == {"greeting": "hello from api 1.0, Ada"}


def test_a_previous_minor_plugins_state_lost_is_still_understood(compat_wf: CompatWf) -> None:
    # `compat.lost` answers `upstream` with the STATE_LOST message, as a 1.1
    # source did. The 1.2 host reads it as a lost session: it is not retried
    # (attempts 1 of 3) and the run record keeps the code `state_lost`.
    doc = {
        "name": "compat-lost",
        "nodes": [{"id": "l", "use": "compat.lost", "retry": {"attempts": 3, "backoff_ms": 10}}],
    }
    r = compat_wf.run_workflow(doc, "compat-lost.json")
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


def test_an_upstream_error_that_is_not_state_lost_keeps_its_code(compat_wf: CompatWf) -> None:
    # The control: the same plugin's ordinary `upstream` error is not read as a
    # lost session: it is retried as configured and recorded as `upstream`.
    doc = {
        "name": "compat-down",
        "nodes": [{"id": "d", "use": "compat.down", "retry": {"attempts": 2, "backoff_ms": 10}}],
    }
    r = compat_wf.run_workflow(doc, "compat-down.json")
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


# ---- wf-plugin-api 1.1: sessions and leases


@pytest.fixture(params=ISOLATIONS)
def compat11_wf(request: pytest.FixtureRequest, wf: Wf) -> CompatWf:
    installed = wf.install_file(compat_file("WF_COMPAT_PLUGIN_V1_1", "plugin-v1_1"))
    return CompatWf(wf, isolate(wf, request.param, [installed], ["compat-v1-1"]), request.param)


def test_a_1_1_plugin_loads(compat11_wf: CompatWf) -> None:
    doc = compat11_wf.plugins_json()
    ours = [p for p in doc["loaded"] if p["name"] == "compat-v1-1"]
    assert len(ours) == 1 and ours[0]["api_version"] == "1.1.0", doc
    assert doc["refused"] == [], doc["refused"]


async def test_a_1_1_plugin_counts_on_the_shared_session(compat11_wf: CompatWf) -> None:
    with anyio.fail_after(60):
        async with Client(compat11_wf.params(), mode="auto") as c:
            first = await c.call_tool("compat11__count", {})
            second = await c.call_tool("compat11__count", {})
    assert not first.is_error and not second.is_error, (content_text(first.content), content_text(second.content))
    assert first.structured_content == {"count": 1, "lease": None, "epoch": 1}
    assert second.structured_content == {"count": 2, "lease": None, "epoch": 1}


def test_a_1_1_plugin_runs_a_workflow_on_its_own_lease(compat11_wf: CompatWf) -> None:
    # `sessions: run`: the engine opens a lease (the plugin's open_lease), runs
    # both nodes on it (the call's scope names it) and closes it at the end.
    doc = {
        "name": "compat11",
        "sessions": {"compat11": "run"},
        "nodes": [
            {"id": "a", "use": "compat11.count"},
            {"id": "b", "use": "compat11.count", "args": {"after": {"$ref": "nodes.a.output.count"}}},
            {"id": "open", "use": "compat11.leases", "args": {"after": {"$ref": "nodes.b.output.count"}}},
        ],
        "outputs": {
            "a": {"$ref": "nodes.a.output"},
            "b": {"$ref": "nodes.b.output"},
            "open": {"$ref": "nodes.open.output.open"},
        },
    }
    r = compat11_wf.run_workflow(doc, "compat11.json")
    assert r.returncode == 0, r.stderr
    out = json.loads(r.stdout)
    assert out["status"] == "succeeded", out
    a, b = out["outputs"]["a"], out["outputs"]["b"]
    assert isinstance(a["lease"], str) and a["lease"].startswith("lease-"), out
    assert (a["count"], b["count"]) == (1, 2) and a["lease"] == b["lease"], out
    assert out["outputs"]["open"] == 1, out


# ---- wf-plugin-api 1.2: asks and completions


@pytest.fixture(params=ISOLATIONS)
def compat12_wf(request: pytest.FixtureRequest, wf: Wf) -> CompatWf:
    installed = wf.install_file(compat_file("WF_COMPAT_PLUGIN_V1_2", "plugin-v1_2"))
    return CompatWf(wf, isolate(wf, request.param, [installed], ["compat-v1-2"]), request.param)


def test_a_1_2_plugin_loads(compat12_wf: CompatWf) -> None:
    doc = compat12_wf.plugins_json()
    ours = [p for p in doc["loaded"] if p["name"] == "compat-v1-2"]
    assert len(ours) == 1 and ours[0]["api_version"] == "1.2.0", doc
    host_api = doc["host_api"]
    major, minor = (int(x) for x in host_api.split(".")[:2])
    assert (major, minor) > (1, 2), f"the host must be newer than the plugin: {host_api}"


# A 2026-07-28 client (`auto`) gets the 1.2 plugin's single ask as a round of wf's own
# (the host's rounds also take a newer plugin's keyed rounds, `CallerRequest::Round`).
@pytest.mark.parametrize("mode", ["legacy", "auto"])
async def test_a_1_2_plugin_asks_the_client(compat12_wf: CompatWf, mode: str) -> None:
    a = Answerer()
    with anyio.fail_after(60):
        async with Client(compat12_wf.params(), mode=mode, **a.callbacks()) as c:
            r = await c.call_tool("compat12__ask", {})
    assert not r.is_error, content_text(r.content)
    assert r.structured_content == {"greeting": f"hello from api 1.2, {ANSWER_NAME}"}
    assert len(a.elicitations) == 1 and a.elicitations[0].message == "Whom shall I greet?", a.elicitations


async def test_a_1_2_plugin_completes_a_prompt_argument(compat12_wf: CompatWf) -> None:
    with anyio.fail_after(60):
        async with Client(compat12_wf.params(), mode="auto") as c:
            prompts = {p.name for p in (await c.list_prompts()).prompts}
            assert "compat12__greet" in prompts, sorted(prompts)
            ref = types.PromptReference(type="ref/prompt", name="compat12__greet")
            r = await c.complete(ref, {"name": "name", "value": "a"})
            assert r.completion.values == ["Ada", "Alan"], r
            r = await c.complete(ref, {"name": "name", "value": "g"})
            assert r.completion.values == ["Grace"], r
            got = await c.get_prompt("compat12__greet", {"name": "Ada"})
            assert "Greet Ada, from api 1.2." in repr(got), got


def test_a_1_2_plugins_typed_state_lost(compat12_wf: CompatWf) -> None:
    doc = {"name": "compat12-lost", "nodes": [{"id": "l", "use": "compat12.lost", "retry": {"attempts": 3, "backoff_ms": 10}}]}
    r = compat12_wf.run_workflow(doc, "compat12-lost.json")
    assert r.returncode == 1, (r.returncode, r.stderr)
    out = json.loads(r.stdout)
    db = sqlite3.connect(compat12_wf.state_dir / "wf.db")
    try:
        row = db.execute(
            "SELECT status, error_code, attempts FROM node_runs WHERE run_id = ?", (out["run_id"],)
        ).fetchone()
    finally:
        db.close()
    assert row == ("failed", "state_lost", 1), row


async def task_declaring_call(compat_wf: CompatWf, tool: str, arguments: dict) -> dict:
    """`tool` called over HTTP by a 2026-07-28 client that declared MCP Tasks (plugin
    API 1.3's `call_tool_as_task` is unknown to an older plugin: it answers
    `unsupported` and wf makes the plain call); the JSON-RPC response."""
    import httpx2

    from test_tasks_runs import Raw

    server = compat_wf.wf.start_http("127.0.0.1", None, "--config", str(compat_wf.config))
    async with httpx2.AsyncClient(timeout=60) as http:
        raw = Raw(http, server.url, "unused")
        with anyio.fail_after(60):
            while True:
                r = await raw.request("tools/call", {"name": tool, "arguments": arguments}, tool)
                if "result" in r or "unknown tool" not in r["error"]["message"]:
                    return r
                await anyio.sleep(0.1)


async def test_a_previous_minor_plugin_serves_a_task_declaring_clients_call_plainly(compat_wf: CompatWf) -> None:
    r = (await task_declaring_call(compat_wf, "compat__hello", {"name": "Tasks"}))["result"]
    assert r.get("resultType", "complete") == "complete", r
    assert r["structuredContent"] == {"greeting": "hello from api 1.0, Tasks"}, r


async def test_a_1_1_plugin_serves_a_task_declaring_clients_call_plainly(compat11_wf: CompatWf) -> None:
    r = (await task_declaring_call(compat11_wf, "compat11__count", {}))["result"]
    assert r.get("resultType", "complete") == "complete", r
    assert r["structuredContent"]["count"] == 1, r


async def test_a_1_2_plugin_serves_a_task_declaring_clients_call_plainly(compat12_wf: CompatWf) -> None:
    # Its typed error comes through as from a plain call.
    r = await task_declaring_call(compat12_wf, "compat12__lost", {})
    assert r["error"]["data"]["code"] == "state_lost", r


# ---- wf-plugin-api 1.3: calls served as tasks


@pytest.fixture(params=ISOLATIONS)
def compat13_wf(request: pytest.FixtureRequest, wf: Wf) -> CompatWf:
    installed = wf.install_file(compat_file("WF_COMPAT_PLUGIN_V1_3", "plugin-v1_3"))
    return CompatWf(wf, isolate(wf, request.param, [installed], ["compat-v1-3"]), request.param)


def test_a_1_3_plugin_loads(compat13_wf: CompatWf) -> None:
    doc = compat13_wf.plugins_json()
    ours = [p for p in doc["loaded"] if p["name"] == "compat-v1-3"]
    assert len(ours) == 1 and ours[0]["api_version"] == "1.3.0", doc
    major, minor = (int(x) for x in doc["host_api"].split(".")[:2])
    assert (major, minor) > (1, 3), f"the host must be newer than the plugin: {doc['host_api']}"


async def test_a_1_3_plugin_serves_a_task_and_its_older_glue_refuses_input(compat13_wf: CompatWf) -> None:
    """The 1.3 plugin's task through today's host: a handle at once, `tasks/get` with
    its result; `tasks/update` (1.4's `UpdateTask`, unknown to its glue) is refused
    with a clear error and the task is untouched; `tasks/cancel` reaches it."""
    import httpx2

    from test_tasks_runs import Raw

    server = compat13_wf.wf.start_http("127.0.0.1", None, "--config", str(compat13_wf.config))
    async with httpx2.AsyncClient(timeout=60) as http:
        raw = Raw(http, server.url, "unused")
        with anyio.fail_after(60):
            while "result" not in (r := await raw.request("tools/call", {"name": "compat13__job", "arguments": {"text": "hi"}}, "compat13__job")):
                assert "unknown tool" in r["error"]["message"], r
                await anyio.sleep(0.1)
        created = r["result"]
        assert created["resultType"] == "task" and created["status"] == "working", created
        task_id = created["taskId"]
        assert not task_id.startswith("c13-"), "the client sees wf's id, not the plugin's"
        done = await raw.wait_status(task_id, "completed")
        assert done["result"]["content"][0]["text"] == "task: hi, from api 1.3", done
        no = await raw.request("tasks/update", {"taskId": task_id, "inputResponses": {"k": {}}}, task_id)
        assert no["error"]["code"] == -32602 and "takes no input" in no["error"]["message"], no
        other = (await raw.request("tools/call", {"name": "compat13__job", "arguments": {}}, "compat13__job"))["result"]["taskId"]
        ack = await raw.request("tasks/cancel", {"taskId": other}, other)
        assert "result" in ack, ack
        assert (await raw.wait_status(other, "cancelled"))["taskId"] == other


# ---- wf-plugin-api 1.4: input for a task; before 1.5's call lane


@pytest.fixture(params=ISOLATIONS)
def compat14_wf(request: pytest.FixtureRequest, wf: Wf) -> CompatWf:
    installed = wf.install_file(compat_file("WF_COMPAT_PLUGIN_V1_4", "plugin-v1_4"))
    return CompatWf(wf, isolate(wf, request.param, [installed], ["compat-v1-4"]), request.param)


def test_a_1_4_plugin_loads(compat14_wf: CompatWf) -> None:
    doc = compat14_wf.plugins_json()
    ours = [p for p in doc["loaded"] if p["name"] == "compat-v1-4"]
    assert len(ours) == 1 and ours[0]["api_version"] == "1.4.0", doc
    major, minor = (int(x) for x in doc["host_api"].split(".")[:2])
    assert (major, minor) > (1, 4), f"the host must be newer than the plugin: {doc['host_api']}"


async def test_a_1_4_plugin_takes_input_for_its_task(compat14_wf: CompatWf) -> None:
    """The 1.4 plugin's task through today's host: `input_required` with its
    `inputRequests`, answered with `tasks/update` (1.4's `UpdateTask`), then
    `completed` with a result that holds the answer. Isolated, its glue answers
    1.5's `call_lane` `unsupported`, so wf-plugin-host serves its calls itself:
    every call here crosses that path."""
    import httpx2

    from test_tasks_runs import Raw

    server = compat14_wf.wf.start_http("127.0.0.1", None, "--config", str(compat14_wf.config))
    async with httpx2.AsyncClient(timeout=60) as http:
        raw = Raw(http, server.url, "unused")
        with anyio.fail_after(60):
            while "result" not in (r := await raw.request("tools/call", {"name": "compat14__job", "arguments": {"text": "hi"}}, "compat14__job")):
                assert "unknown tool" in r["error"]["message"], r
                await anyio.sleep(0.1)
        created = r["result"]
        assert created["resultType"] == "task" and created["status"] == "working", created
        task_id = created["taskId"]
        waiting = await raw.wait_status(task_id, "input_required")
        assert waiting["inputRequests"]["name"]["params"]["message"] == "compat 1.4 asks your name", waiting
        answer = {"action": "accept", "content": {"name": "Ada"}}
        ack = await raw.request("tasks/update", {"taskId": task_id, "inputResponses": {"name": answer}}, task_id)
        assert "result" in ack, ack
        done = await raw.wait_status(task_id, "completed")
        assert done["result"]["content"][0]["text"] == "task: hi, for Ada, from api 1.4", done


# ---- wf-plugin-api 1.5: the call lane; asks one at a time in a 1.6 host


@pytest.fixture(params=ISOLATIONS)
def compat15_wf(request: pytest.FixtureRequest, wf: Wf) -> CompatWf:
    installed = wf.install_file(compat_file("WF_COMPAT_PLUGIN_V1_5", "plugin-v1_5"))
    return CompatWf(wf, isolate(wf, request.param, [installed], ["compat-v1-5"]), request.param)


def test_a_1_5_plugin_loads(compat15_wf: CompatWf) -> None:
    doc = compat15_wf.plugins_json()
    ours = [p for p in doc["loaded"] if p["name"] == "compat-v1-5"]
    assert len(ours) == 1 and ours[0]["api_version"] == "1.5.0", doc
    major, minor = (int(x) for x in doc["host_api"].split(".")[:2])
    assert (major, minor) > (1, 5), f"the host must be newer than the plugin: {doc['host_api']}"


COMPAT15_ASKS = ["compat 1.5 asks your name", "compat 1.5 asks whether to go on"]


def compat15_done(compat15_wf: CompatWf, r) -> None:
    """The 1.5 plugin's answer; isolated, its call ran on its own runtime
    (`wf-plugin`, 1.5's call lane), not on wf-plugin-host's thread."""
    assert not r.is_error, content_text(r.content)
    got = r.structured_content
    assert got["greeting"] == f"hello from api 1.5, {ANSWER_NAME}" and got["check"] is True, got
    if compat15_wf.isolation == "process":
        assert got["thread"] == "wf-plugin", got


async def test_a_1_5_plugins_asks_reach_a_2025_client_one_request_each(compat15_wf: CompatWf) -> None:
    a = Answerer()
    with anyio.fail_after(60):
        async with Client(compat15_wf.params(), mode="legacy", **a.callbacks()) as c:
            r = await c.call_tool("compat15__ask", {})
    compat15_done(compat15_wf, r)
    assert [e.message for e in a.elicitations] == COMPAT15_ASKS, a.elicitations


async def test_a_1_5_plugins_asks_reach_a_2026_client_as_rounds_of_wfs_keys(compat15_wf: CompatWf) -> None:
    """A 1.5 plugin has no `ask_round`: its two asks, one after the other, reach a
    2026-07-28 client as two input-required rounds of one request each, under a
    key of wf's own; each answer goes back with the round's `requestState`."""
    from mcp_types import InputRequiredResult

    answers = [{"name": ANSWER_NAME}, {"check": True}]
    seen: list[str] = []
    with anyio.fail_after(60):
        async with Client(compat15_wf.params(), mode="auto", **Answerer().callbacks()) as c:
            r = await c.session.call_tool("compat15__ask", {}, allow_input_required=True)
            for content in answers:
                assert isinstance(r, InputRequiredResult), r
                assert r.input_requests is not None and len(r.input_requests) == 1 and r.request_state, r
                [(key, req)] = r.input_requests.items()
                assert req.method == "elicitation/create", req
                seen.append(req.params.message)
                r = await c.session.call_tool(
                    "compat15__ask",
                    {},
                    input_responses={key: {"action": "accept", "content": content}},
                    request_state=r.request_state,
                    allow_input_required=True,
                )
    assert not isinstance(r, InputRequiredResult), r
    assert seen == COMPAT15_ASKS
    compat15_done(compat15_wf, r)


# ---- wf-plugin-api 1.6: asks as one round, in a 1.7 host (which also asks it for descriptors)


@pytest.fixture(params=ISOLATIONS)
def compat16_wf(request: pytest.FixtureRequest, wf: Wf) -> CompatWf:
    installed = wf.install_file(compat_file("WF_COMPAT_PLUGIN_V1_6", "plugin-v1_6"))
    return CompatWf(wf, isolate(wf, request.param, [installed], ["compat-v1-6"]), request.param)


def test_a_1_6_plugin_loads(compat16_wf: CompatWf) -> None:
    doc = compat16_wf.plugins_json()
    ours = [p for p in doc["loaded"] if p["name"] == "compat-v1-6"]
    assert len(ours) == 1 and ours[0]["api_version"] == "1.6.0", doc
    major, minor = (int(x) for x in doc["host_api"].split(".")[:2])
    assert (major, minor) > (1, 6), f"the host must be newer than the plugin: {doc['host_api']}"


COMPAT16_ASKS = {"name": "compat 1.6 asks your name", "check": "compat 1.6 asks whether to go on"}


def compat16_done(r) -> None:
    assert not r.is_error, content_text(r.content)
    got = r.structured_content
    assert got == {"greeting": f"hello from api 1.6, {ANSWER_NAME}", "check": True}, got


async def test_a_1_6_plugins_round_reaches_a_2025_client_one_request_each(compat16_wf: CompatWf) -> None:
    """A 2025-11-25 client cannot take a round: wf asks it each request in key
    order (`check`, then `name`)."""
    a = Answerer()
    with anyio.fail_after(60):
        async with Client(compat16_wf.params(), mode="legacy", **a.callbacks()) as c:
            r = await c.call_tool("compat16__ask", {})
    compat16_done(r)
    assert [e.message for e in a.elicitations] == [COMPAT16_ASKS["check"], COMPAT16_ASKS["name"]], a.elicitations


async def test_a_1_6_plugins_round_reaches_a_2026_client_as_one_round_of_its_keys(compat16_wf: CompatWf) -> None:
    """A 2026-07-28 client gets the plugin's round whole: one input-required
    result with both requests under the plugin's own keys; one answer each
    goes back with the round's `requestState`."""
    from mcp_types import InputRequiredResult

    with anyio.fail_after(60):
        async with Client(compat16_wf.params(), mode="auto", **Answerer().callbacks()) as c:
            r = await c.session.call_tool("compat16__ask", {}, allow_input_required=True)
            assert isinstance(r, InputRequiredResult), r
            assert r.input_requests is not None and r.request_state, r
            assert {k: req.params.message for k, req in r.input_requests.items()} == COMPAT16_ASKS, r
            assert all(req.method == "elicitation/create" for req in r.input_requests.values()), r
            r = await c.session.call_tool(
                "compat16__ask",
                {},
                input_responses={
                    "name": {"action": "accept", "content": {"name": ANSWER_NAME}},
                    "check": {"action": "accept", "content": {"check": True}},
                },
                request_state=r.request_state,
                allow_input_required=True,
            )
    assert not isinstance(r, InputRequiredResult), r
    compat16_done(r)
