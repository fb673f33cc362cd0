"""Cedar policies on the one call pipeline (issue #51), end to end: the official
Python client, the real `wf serve` and the real @modelcontextprotocol/server-everything.

- An argument rule allows one call to a tool and denies another, with the policy's
  id and `@reason` in the error; the same denial through `wf_call`, the planner's
  `call_capability` and a workflow node at run time; `wf_find` and `wf_describe`
  never reveal a tool no call could be permitted, and a workflow using one is
  refused at publish.
- `tools/list` hides a tool every call to it is denied; prompts are governed too.
- An annotation rule (`readOnlyHint` from server-everything's own tool annotations)
  hides and refuses a tool that may write.
- A reload that adds a forbid takes effect on the next call.
- A policy naming an unknown tool is refused at start with its file and line.
- A group rule holds for both principals a `[[server.tokens]]` `groups` puts in the
  group, and not for one outside it (over HTTP, 2026-07-28 stateless calls).
- An argument rule on an OpenAPI source's operation (the FastAPI app of
  test_openapi.py): the path parameter `item_id` below 100 is allowed, above denied.
- A policy file is watched on its own: an edit is in force on a later call without a
  reload; an edit that does not load is logged and the policies in force stay.
"""

from __future__ import annotations

import json
import uuid
from pathlib import Path
from typing import Any

import anyio
import pytest
from mcp import Client

from admin_support import admin, admin_outcome
from conftest import Wf, all_prompts, all_tools, call_outcome, toml_config, wait_listed

pytestmark = pytest.mark.anyio

OP_TIMEOUT = 60

POLICIES = """\
@id("baseline")
permit(principal, action, resource);

@id("echo-ok-only")
@reason("echo may only say ok")
forbid(principal, action == wf::Action::"everything__echo", resource)
unless { context.arguments.message like "ok*" };

@id("no-sum")
@reason("sums are off today")
forbid(principal, action == wf::Action::"everything__get-sum", resource);

@id("read-only-here")
@reason("tools here may read but not write")
forbid(principal, action in wf::Action::"tool", resource)
when { resource.source == "everything" && !resource.annotations.readOnlyHint };

@id("no-args-prompt")
@reason("that prompt is retired")
forbid(principal, action == wf::Action::"prompt:everything__args-prompt", resource);
"""

NO_ECHO = """
@id("no-echo")
@reason("echo is closed")
forbid(principal, action == wf::Action::"everything__echo", resource);
"""


def config_with(wf: Wf, everything_bin: Path, policies: str) -> Path:
    wf.write_config(policies, "policy.cedar")
    text = toml_config({"everything": {"command": str(everything_bin)}})
    return wf.write_config('[policy]\nfiles = ["policy.cedar"]\n\n' + text)


async def structured(c: Client, name: str, arguments: dict[str, Any]) -> Any:
    result = await c.call_tool(name, arguments)
    assert not result.is_error, result
    return result.structured_content


async def test_policies_hold_on_every_path(wf: Wf, everything_bin: Path) -> None:
    config = config_with(wf, everything_bin, POLICIES)
    async with wf.stdio_client("auto", "--config", str(config)) as c:
        with anyio.fail_after(OP_TIMEOUT):
            tools = {t.name for t in await wait_listed(c, "everything__echo")}
            # Listed when some call could be permitted, hidden when none could.
            assert "everything__echo" in tools
            assert "everything__get-sum" not in tools, "a tool every call is denied is listed"
            assert "everything__get-env" in tools
            # An annotation rule: server-everything marks toggle-subscriber-updates
            # readOnlyHint false (echo and get-env true).
            assert "everything__toggle-subscriber-updates" not in tools, "a tool the annotation rule forbids is listed"
            _, error = await call_outcome(c, "wf_call", {"name": "everything__toggle-subscriber-updates", "arguments": {}})
            assert error is not None and "read-only-here" in error and "may read but not write" in error, error

            ok = await c.call_tool("everything__echo", {"message": "ok, fine"})
            assert not ok.is_error, ok
            _, error = await call_outcome(c, "everything__echo", {"message": "not fine"})
            assert error is not None, "the argument rule did not deny"
            assert 'echo-ok-only' in error and "echo may only say ok" in error, error

            # wf_call: the same decision, the same error.
            _, error = await call_outcome(
                c, "wf_call", {"name": "everything__echo", "arguments": {"message": "not fine"}}
            )
            assert error is not None and 'echo-ok-only' in error, error
            _, error = await call_outcome(c, "wf_call", {"name": "everything__get-sum", "arguments": {"a": 1, "b": 2}})
            assert error is not None and 'no-sum' in error and "sums are off today" in error, error
            ok = await c.call_tool("wf_call", {"name": "everything__echo", "arguments": {"message": "ok via wf_call"}})
            assert not ok.is_error, ok

            # wf_find and wf_describe never reveal what no call could be permitted.
            found = await structured(c, "wf_find", {"query": "sum of two numbers add", "limit": 50})
            assert "everything__get-sum" not in json.dumps(found), found
            described = await structured(c, "wf_describe", {"names": ["everything__get-sum", "everything__echo"]})
            assert described["unknown"] == ["everything__get-sum"], described

            # The planner's call_capability decides the same.
            _, error = await call_outcome(
                c, "wf_planner__call_capability", {"ref": "everything.echo", "arguments": {"message": "nope"}}
            )
            assert error is not None and 'echo-ok-only' in error, error

            # A workflow node, at run time, as the run's principal.
            _, error = await call_outcome(
                c,
                "wf_planner__run_workflow",
                {"workflow": {"name": "w", "nodes": [{"id": "n", "use": "everything.echo", "args": {"message": "nope"}}]}},
            )
            assert error is not None and '"failed"' in error and "echo-ok-only" in error, error
            run = await structured(
                c,
                "wf_planner__run_workflow",
                {"workflow": {"name": "w", "nodes": [{"id": "n", "use": "everything.echo", "args": {"message": "ok"}}]}},
            )
            assert run["status"] == "succeeded", run

            # At publish: a workflow using a capability no call could be permitted.
            draft = await structured(
                c,
                "wf_planner__save_draft",
                {"name": "sums", "workflow": {"name": "sums", "nodes": [{"id": "s", "use": "everything.get-sum", "args": {"a": 1, "b": 2}}]}},
            )
            _, error = await call_outcome(c, "wf_planner__publish_artifact", {"draft_id": draft["draft_id"]})
            assert error is not None and "everything__get-sum" in error, error

            # Prompts are governed: hidden and refused.
            prompts = {p.name for p in await all_prompts(c)}
            assert "everything__simple-prompt" in prompts, prompts
            assert "everything__args-prompt" not in prompts, prompts
            with pytest.raises(Exception) as refused:
                await c.get_prompt("everything__args-prompt", {"city": "Paris", "state": "Texas"})
            assert "no-args-prompt" in str(refused.value), refused.value

            # A reload that adds a forbid takes effect on the next call.
            config.parent.joinpath("policy.cedar").write_text(POLICIES + NO_ECHO)
            outcome = await admin(c, "reload")
            assert outcome["error"] is None, outcome
            _, error = await call_outcome(c, "everything__echo", {"message": "ok again"})
            assert error is not None and 'no-echo' in error and "echo is closed" in error, error
            assert "everything__echo" not in {t.name for t in await all_tools(c)}

            # A reload whose policies do not load is refused; the ones in force stay.
            config.parent.joinpath("policy.cedar").write_text(POLICIES + 'forbid(principal, action == wf::Action::"everything__ech0", resource);\n')
            _, outcome = await admin_outcome(c, "reload")
            assert "policy.cedar:21:" in json.dumps(outcome) and "everything__ech0" in json.dumps(outcome), outcome
            _, error = await call_outcome(c, "everything__echo", {"message": "ok again"})
            assert error is not None and 'no-echo' in error, error


def test_a_policy_naming_an_unknown_tool_or_argument_is_refused_at_start(wf: Wf, everything_bin: Path) -> None:
    for bad, line in (
        ('permit(principal, action, resource);\n\nforbid(principal, action == wf::Action::"everything__ecoh", resource);\n', 3),
        (
            'permit(principal, action, resource);\nforbid(principal, action == wf::Action::"everything__echo", resource)\n'
            '  when { context.arguments.mesage == "x" };\n',
            3,
        ),
    ):
        config = config_with(wf, everything_bin, bad)
        proc = wf.run("serve", *wf.plugin_args(), "--config", str(config), timeout=120)
        assert proc.returncode != 0, proc.stderr
        assert f"policy.cedar:{line}:" in proc.stderr, proc.stderr


GROUP_POLICIES = """\
@id("baseline")
permit(principal, action, resource);

@id("support-ok-only")
@reason("support may only say ok")
forbid(principal in wf::Group::"support", action == wf::Action::"everything__echo", resource)
unless { context.arguments.message like "ok*" };
"""


async def test_a_group_rule_holds_for_every_principal_in_the_group(wf: Wf, everything_bin: Path) -> None:
    import httpx2

    from test_tasks_runs import Raw

    tokens = {k: f"{k}-{uuid.uuid4().hex}" for k in ("alice", "bob", "carol")}
    server_toml = "".join(
        f'[[server.tokens]]\nname = "{k}"\ntoken = "${{E2E_{k.upper()}_TOKEN}}"\n'
        + ('groups = ["support"]\n' if k != "carol" else "")
        + "\n"
        for k in tokens
    )
    wf.write_config(GROUP_POLICIES, "policy.cedar")
    text = toml_config({"everything": {"command": str(everything_bin)}})
    telemetry = '[telemetry]\nmetrics_token = "${WF_E2E_METRICS_TOKEN}"\n\n'
    config = wf.write_config(telemetry + '[policy]\nfiles = ["policy.cedar"]\n\n' + server_toml + text)
    metrics_token = "metrics-secret-0123456789"
    env = {f"E2E_{k.upper()}_TOKEN": v for k, v in tokens.items()} | {"WF_E2E_METRICS_TOKEN": metrics_token}
    server = wf.start_http("127.0.0.1", None, "--config", str(config), env=env)

    def echo(message: str) -> dict[str, Any]:
        return {"name": "everything__echo", "arguments": {"message": message}}

    async with httpx2.AsyncClient(timeout=OP_TIMEOUT) as http:
        raw = {k: Raw(http, server.url, t, tasks=False) for k, t in tokens.items()}
        with anyio.fail_after(OP_TIMEOUT):
            while "result" not in (r := await raw["carol"].request("tools/call", echo("ok"), "everything__echo")):
                assert "unknown tool" in r["error"]["message"], r
                await anyio.sleep(0.1)
        for who in ("alice", "bob"):
            denied = await raw[who].request("tools/call", echo("nope"), "everything__echo")
            assert "error" in denied, (who, denied)
            assert "support-ok-only" in denied["error"]["message"], (who, denied)
            assert "support may only say ok" in denied["error"]["message"], (who, denied)
            ok = await raw[who].request("tools/call", echo("ok then"), "everything__echo")
            assert "result" in ok and not ok["result"].get("isError"), (who, ok)
        other = await raw["carol"].request("tools/call", echo("nope"), "everything__echo")
        assert "result" in other and not other["result"].get("isError"), other
        # Metrics per policy id: the group rule denied twice.
        from test_quotas import metrics, sample

        samples, text = metrics(server.port, metrics_token)
        assert sample(samples, "wf_policy_decisions_total", policy="support-ok-only", outcome="deny") == 2, text
        assert sample(samples, "wf_policy_decisions_total", policy="baseline", outcome="allow") >= 3, text

        # The policy file is watched on its own: an edit is in force without a reload…
        policy_file = config.parent / "policy.cedar"
        policy_file.write_text(GROUP_POLICIES + NO_ECHO)
        with anyio.fail_after(OP_TIMEOUT):
            while "error" not in (r := await raw["carol"].request("tools/call", echo("ok"), "everything__echo")):
                await anyio.sleep(0.1)
        assert "no-echo" in r["error"]["message"], r
        # …and an edit that does not load is logged; the policies in force stay.
        policy_file.write_text(GROUP_POLICIES + 'forbid(principal, action == wf::Action::"everything__ech0", resource);\n')
        with anyio.fail_after(OP_TIMEOUT):
            while "does not load" not in server.log.read_text(errors="replace"):
                await anyio.sleep(0.1)
        assert "everything__ech0" in server.log.read_text(errors="replace")
        r = await raw["carol"].request("tools/call", echo("ok"), "everything__echo")
        assert "error" in r and "no-echo" in r["error"]["message"], r


API_POLICIES = """\
@id("baseline")
permit(principal, action, resource);

@id("small-items-only")
@reason("only items below 100 may be looked up")
forbid(principal, action == wf::Action::"api__lookup_items__item_id__get", resource)
unless { context.arguments.item_id < 100 };
"""


async def test_an_argument_rule_on_an_openapi_operation(wf: Wf) -> None:
    from test_openapi import TOKEN, App

    app = App(wf.root)
    try:
        wf.write_config(API_POLICIES, "policy.cedar")
        source = {"kind": "openapi", "spec": f"{app.base}/openapi.json", "auth": {"type": "bearer", "token": "${API_TOKEN}"}}
        config = wf.write_config('[policy]\nfiles = ["policy.cedar"]\n\n' + toml_config({"api": source}))
        async with wf.stdio_client("auto", "--config", str(config), env={"API_TOKEN": TOKEN}) as c:
            with anyio.fail_after(OP_TIMEOUT):
                await wait_listed(c, "api__lookup_items__item_id__get")
                ok = await structured(c, "api__lookup_items__item_id__get", {"item_id": 7})
                assert ok["item_id"] == 7, ok
                _, error = await call_outcome(c, "api__lookup_items__item_id__get", {"item_id": 700})
                assert error is not None and "small-items-only" in error and "below 100" in error, error
                seen = [e for e in app.seen() if e.get("request", "").startswith("GET /items/")]
                assert [e["request"] for e in seen] == ["GET /items/7"], seen
    finally:
        app.stop()
