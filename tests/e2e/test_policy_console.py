"""The console's actions go through the call pipeline (issue #51): a Cedar policy
that forbids an admin tool refuses the console's button for it (403 naming the
policy and its reason, nothing done), the refusal is in the audit trail (client
`console`, the deciding policy), and an action no policy forbids still works. Over
raw HTTP against `wf serve --http` with a bearer and an admin token."""

from __future__ import annotations

import anyio
import httpx2
import pytest

from conftest import Wf
from console_support import start_console

pytestmark = pytest.mark.anyio

POLICIES = """\
@id("baseline")
permit(principal, action, resource);

@id("no-console-reload")
@reason("reloads go through change control")
forbid(principal, action == wf::Action::"wf_admin__reload", resource);
"""


async def test_a_policy_forbidding_a_tool_blocks_the_consoles_action_and_is_audited(wf: Wf) -> None:
    wf.write_config(POLICIES, "policy.cedar")
    console = start_console(wf, '\n[policy]\nfiles = ["policy.cedar"]\n')
    headers = {**console.auth(), "Connection": "close"}
    async with httpx2.AsyncClient(base_url=console.server.base_url, timeout=30) as http:
        with anyio.fail_after(60):
            r = await http.post("/console/api/reload", headers=headers, json={})
            assert r.status_code == 403, r.text
            error = r.json()["error"]
            assert "no-console-reload" in error and "change control" in error, error
            status = (await http.get("/console/api/status", headers=headers)).json()
            assert status["last_reload"] is None, status
            # An action no policy forbids: answered.
            r = await http.post("/console/api/sources/refresh", headers=headers, json={})
            assert r.status_code == 200, r.text
            # The refusal is recorded (the writer batches: wait for the row).
            while True:
                r = await http.post(
                    "/console/api/audit",
                    headers=headers,
                    json={"capability": "wf_admin__reload", "decision": "deny"},
                )
                assert r.status_code == 200, r.text
                records = r.json()["records"]
                if records:
                    break
                await anyio.sleep(0.1)
    [rec] = records
    assert rec["client"] == "console" and rec["policies"] == ["no-console-reload"], rec
    assert rec["outcome"] == "denied" and "change control" in rec["error"], rec
