"""A client that answers what a server asks back (elicitation, sampling, roots)
and records it, plus the log messages it receives: the official `mcp` client's
callbacks, for the server->client forwarding tests."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import anyio
from mcp import Client, types

ANSWER_NAME = "Ada Lovelace"
SAMPLED = "sampled by the test client's model"
ROOT_URI = "file:///tmp/wf-forwarding-root"


@dataclass
class Answerer:
    """Answers and records each server->client request and log message."""

    elicitations: list[types.ElicitRequestParams] = field(default_factory=list)
    samplings: list[types.CreateMessageRequestParams] = field(default_factory=list)
    roots_asked: int = 0
    logs: list[types.LoggingMessageNotificationParams] = field(default_factory=list)

    async def elicit(self, _ctx: Any, params: types.ElicitRequestParams) -> types.ElicitResult:
        self.elicitations.append(params)
        if getattr(params, "mode", "form") == "url":
            return types.ElicitResult(action="accept")
        return types.ElicitResult(action="accept", content={"name": ANSWER_NAME, "check": True})

    async def sample(self, _ctx: Any, params: types.CreateMessageRequestParams) -> types.CreateMessageResult:
        self.samplings.append(params)
        return types.CreateMessageResult(
            role="assistant", content=types.TextContent(type="text", text=SAMPLED), model="test-model"
        )

    async def roots(self, _ctx: Any) -> types.ListRootsResult:
        self.roots_asked += 1
        return types.ListRootsResult(roots=[types.Root(uri=ROOT_URI, name="test root")])  # type: ignore[arg-type]

    async def log(self, params: types.LoggingMessageNotificationParams) -> None:
        self.logs.append(params)

    def callbacks(self, elicit: bool = True, sample: bool = True, roots: bool = True) -> dict[str, Any]:
        """`mcp.Client` keyword arguments: a client that declares these capabilities."""
        kw: dict[str, Any] = {"logging_callback": self.log}
        if elicit:
            kw["elicitation_callback"] = self.elicit
        if sample:
            kw["sampling_callback"] = self.sample
        if roots:
            kw["list_roots_callback"] = self.roots
        return kw

    async def wait_logs(self, n: int, timeout: float) -> None:
        """Waits until `n` log messages arrived (fails after `timeout`)."""
        with anyio.fail_after(timeout):
            while len(self.logs) < n:
                await anyio.sleep(0.05)


async def overlapping_asks(
    c1: Client, c2: Client, tool: str, upstream_events: Any, gate: Path, timeout: float
) -> dict[str, Any]:
    """`c1` makes the fixture's `tool` elicit and `c2` makes it sample, with both
    calls in flight upstream before either asks (the fixture waits for `gate`).
    Returns each call's `call_outcome` by name ("first", "second")."""
    from conftest import call_outcome

    results: dict[str, Any] = {}

    async def run(name: str, c: Client, args: dict[str, Any]) -> None:
        results[name] = await call_outcome(c, tool, args)

    with anyio.fail_after(timeout):
        async with anyio.create_task_group() as tg:
            tg.start_soon(run, "first", c1, {"kind": "elicit", "until": str(gate)})
            tg.start_soon(run, "second", c2, {"kind": "sample", "until": str(gate)})
            await upstream_events.wait_for(event="call", tool="ask", kind="elicit")
            await upstream_events.wait_for(event="call", tool="ask", kind="sample")
            gate.touch()
    return results
