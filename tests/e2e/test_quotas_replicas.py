"""A quota shared by replicas (`[[quotas]] scope = "replicas"`, issue #51): two
`wf serve --http` replicas on one PostgreSQL database, each with the real
server-everything, the official `mcp` client calling both in turn. A budget of
10 calls admits 10 across both (not 20), give or take the one batch each
replica may run ahead on credit, and every refusal names the rule. A replica
stopped with grants in hand gives them back.

Needs a PostgreSQL server: `WF_TEST_PG_URL` (as test_replicas.py).
"""

from __future__ import annotations

from pathlib import Path

import anyio
import pytest
from mcp.shared.exceptions import MCPError

from conftest import Wf, tail, toml_config, wait_listed
from test_replicas import replica_config, start_replicas

pytestmark = pytest.mark.anyio

BUDGET = 10
BATCH = 2
RULE = "echo-shared"


async def test_two_replicas_share_one_budget(wf: Wf, everything_bin: Path) -> None:
    quotas = (
        "[[quotas]]\n"
        f'name = "{RULE}"\n'
        'tools = "everything__echo"\n'
        f'rate = "{BUDGET}/hour"\n'
        'scope = "replicas"\n'
        f"batch = {BATCH}\n\n"
    )
    config = replica_config(wf, extra=quotas + toml_config({"everything": {"command": str(everything_bin)}}))
    r = start_replicas(wf, config, ["a", "b"])
    admitted = {"a": 0, "b": 0}
    spent: set[str] = set()
    waits = 0
    async with wf.http_client(r["a"]) as a, wf.http_client(r["b"]) as b:
        clients = {"a": a, "b": b}
        with anyio.fail_after(120):
            for c in clients.values():
                await wait_listed(c, "everything__echo")
            # In turn until both replicas say the budget is spent.
            i = 0
            while spent != {"a", "b"}:
                assert i < 8 * BUDGET, (admitted, spent)
                name = "ab"[i % 2]
                i += 1
                try:
                    ok = await clients[name].call_tool("everything__echo", {"message": f"call {i}"})
                    assert not ok.is_error, ok
                    admitted[name] += 1
                except MCPError as e:
                    assert e.data["stage"] == "limit" and e.data["policy"] == RULE, e.data
                    assert RULE in e.message and "replica-wide budget" in e.message, e.message
                    if "being fetched" in e.message:
                        # This replica's next grant was still on its way: not a refusal of the budget.
                        waits += 1
                        continue
                    spent.add(name)
                    # One token an hour: the retry is minutes away.
                    assert e.data["retryAfterSeconds"] >= 60, e.data
    total = admitted["a"] + admitted["b"]
    # One budget: at least its 10 calls, at most one batch more per replica; 20 would be two budgets.
    assert BUDGET <= total <= BUDGET + 2 * BATCH, (admitted, waits)
    assert admitted["a"] > 0 and admitted["b"] > 0, admitted
    for s in r.values():
        assert "quota grant" not in s.log.read_text(errors="replace"), tail(s.log)


async def test_a_stopped_replica_gives_its_grant_back(wf: Wf, everything_bin: Path) -> None:
    """Replica a (batch 5) takes the whole budget of 5 as its grant, makes 2 calls and
    stops: the 3 it did not use go back, so replica b (batch 1, so it runs ahead of
    the database by one call at most) makes 3 calls, 4 at most, where without the
    give-back it would make 1."""
    quotas = (
        "[[quotas]]\n"
        f'name = "{RULE}"\n'
        'tools = "everything__echo"\n'
        'rate = "5/hour"\n'
        'scope = "replicas"\n'
        "batch = 5\n\n"
    )
    config = replica_config(wf, extra=quotas + toml_config({"everything": {"command": str(everything_bin)}}))
    # The same database schema and rule; b takes one call at a time.
    config_b = wf.write_config(config.read_text().replace("batch = 5", "batch = 1"), name="b.toml")
    r = start_replicas(wf, config, ["a"]) | start_replicas(wf, config_b, ["b"])
    async with wf.http_client(r["a"]) as a:
        with anyio.fail_after(60):
            await wait_listed(a, "everything__echo")
            # The first call is on credit; its grant (the whole budget) follows.
            ok = await a.call_tool("everything__echo", {"message": "one"})
            assert not ok.is_error, ok
            # A second call on a's grant shows the grant arrived (a retry while it is fetched).
            while True:
                try:
                    ok = await a.call_tool("everything__echo", {"message": "two"})
                    assert not ok.is_error, ok
                    break
                except MCPError as e:
                    assert "being fetched" in e.message, e.message
    r["a"].stop()
    assert "quota grant given back" in r["a"].log.read_text(errors="replace"), tail(r["a"].log)
    admitted = 0
    async with wf.http_client(r["b"]) as b:
        with anyio.fail_after(60):
            await wait_listed(b, "everything__echo")
            while True:
                try:
                    ok = await b.call_tool("everything__echo", {"message": "b"})
                    assert not ok.is_error, ok
                    admitted += 1
                except MCPError as e:
                    assert e.data["policy"] == RULE, e.data
                    if "being fetched" in e.message:
                        continue
                    break
                assert admitted <= 4, admitted
    # a used 2 of 5 and gave 3 back: b gets those 3 (plus at most one call on credit).
    assert 3 <= admitted <= 3 + 1, admitted
