"""Helpers of the workflow tests: calling the planner surface (`wf_planner__*`
tools) through the official `mcp` client and waiting for runs.

Planner tools answer with structured content; a failed call has `is_error` and
`{"error", "hint"}` (plus `detail` for validation problems).
"""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Any

import anyio
from mcp import Client

from conftest import Wf, content_text, toml_config

PLANNER = "wf_planner__"
FX = "fx"
TERMINAL = {"succeeded", "failed", "cancelled", "interrupted"}


def fx_config(wf: Wf, fixture_upstream_bin: Path, name: str = "wf.toml", **extra: Any) -> Path:
    """A config whose source `fx` is the stateful Rust fixture over stdio."""
    return wf.write_config(toml_config({FX: {"command": str(fixture_upstream_bin), **extra}}), name)


def describe(result: Any) -> str:
    return json.dumps(result.structured_content) if result.structured_content is not None else content_text(result.content)


async def planner(c: Client, tool: str, args: dict[str, Any] | None = None) -> dict[str, Any]:
    """Calls planner tool `tool`, which must succeed; returns its structured content."""
    result = await c.call_tool(PLANNER + tool, args or {})
    assert not result.is_error, f"{tool} failed: {describe(result)}"
    assert isinstance(result.structured_content, dict), f"{tool}: no structured content: {result.content}"
    return result.structured_content


async def planner_error(c: Client, tool: str, args: dict[str, Any] | None = None) -> dict[str, Any]:
    """Calls planner tool `tool`, which must fail (is_error); returns its structured content."""
    result = await c.call_tool(PLANNER + tool, args or {})
    assert result.is_error, f"{tool} should have failed: {describe(result)}"
    assert isinstance(result.structured_content, dict), f"{tool}: no structured content: {result.content}"
    return result.structured_content


async def tool_json(c: Client, name: str, args: dict[str, Any] | None = None) -> Any:
    """Calls a (proxied) tool that must succeed with structured content; returns it."""
    result = await c.call_tool(name, args or {})
    assert not result.is_error, f"{name} failed: {describe(result)}"
    assert result.structured_content is not None, f"{name}: no structured content: {result.content}"
    return result.structured_content


async def get_run(c: Client, run_id: str) -> tuple[dict[str, Any], dict[str, dict[str, Any]]]:
    """`get_run`: (the run record, its node records by node id)."""
    got = await planner(c, "get_run", {"run_id": run_id})
    return got["run"], {n["node_id"]: n for n in got["nodes"]}


async def wait_run(c: Client, run_id: str, timeout: float = 30.0, poll: float = 0.05) -> tuple[dict[str, Any], dict[str, dict[str, Any]]]:
    """Polls `get_run` until the run ends; returns (run, nodes by id)."""
    deadline = time.monotonic() + timeout
    while True:
        run, nodes = await get_run(c, run_id)
        if run["status"] in TERMINAL:
            return run, nodes
        assert time.monotonic() < deadline, f"run {run_id} still {run['status']} after {timeout}s: {nodes}"
        await anyio.sleep(poll)


async def wait_node(
    c: Client, run_id: str, node_id: str, status: str = "running", timeout: float = 30.0
) -> tuple[dict[str, Any], dict[str, dict[str, Any]]]:
    """Polls `get_run` until node `node_id` has `status`; returns (run, nodes by id)."""
    deadline = time.monotonic() + timeout
    while True:
        run, nodes = await get_run(c, run_id)
        if nodes.get(node_id, {}).get("status") == status:
            return run, nodes
        assert run["status"] not in TERMINAL, f"run {run_id} ended ({run['status']}) before {node_id} was {status}: {run} {nodes}"
        assert time.monotonic() < deadline, f"node {node_id} of {run_id} not {status} after {timeout}s: {nodes}"
        await anyio.sleep(0.02)


async def publish_and_deploy(c: Client, workflow: dict[str, Any], deployment: str) -> dict[str, Any]:
    """save_draft → publish_artifact → deploy; returns {"draft", "artifact", "deploy"} replies."""
    draft = await planner(c, "save_draft", {"workflow": workflow})
    assert draft["valid"], draft["problems"]
    artifact = await planner(c, "publish_artifact", {"draft_id": draft["draft_id"]})
    deployed = await planner(c, "deploy", {"name": deployment, "artifact": artifact["artifact"]})
    return {"draft": draft, "artifact": artifact, "deploy": deployed}
