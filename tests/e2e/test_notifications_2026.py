"""The 2026-07-28 revision through wf, as its clients see it:

- the methods it removed (`initialize`, `logging/setLevel`, `resources/subscribe`,
  `resources/unsubscribe`), sent as 2026-07-28 requests, get HTTP 404 and -32601;
  the same methods of a 2025-11-25 client still work;
- a resource nobody serves is an error whose `data` carries its `uri`;
- log messages an upstream sends outside any call (real server-everything's
  simulated logging) reach a 2026-07-28 client on its `subscriptions/listen`
  stream, at the level the stream's request opted in to, and only a principal
  that may use the source's tools hears them.
"""

from __future__ import annotations

import uuid
from pathlib import Path

import anyio
import httpx2
import pytest
from mcp.shared.exceptions import MCPError

from caller_support import Answerer
from conftest import Wf, toml_config, wait_listed
from test_principals import as_principal

pytestmark = pytest.mark.anyio

OP_TIMEOUT = 60
META = {
    "io.modelcontextprotocol/protocolVersion": "2026-07-28",
    "io.modelcontextprotocol/clientCapabilities": {},
    "io.modelcontextprotocol/clientInfo": {"name": "raw", "version": "1"},
}
REMOVED = {
    "initialize": {},
    "logging/setLevel": {"level": "info"},
    "resources/subscribe": {"uri": "fixture://counter"},
    "resources/unsubscribe": {"uri": "fixture://counter"},
}


async def test_removed_methods_sent_as_2026_requests_are_404_method_not_found(wf: Wf) -> None:
    server = wf.start_http("127.0.0.1", None, "--config", str(wf.write_config(toml_config({}))))
    headers = {"accept": "application/json, text/event-stream", "mcp-protocol-version": "2026-07-28"}
    async with httpx2.AsyncClient(timeout=OP_TIMEOUT) as http:
        for i, (method, params) in enumerate(REMOVED.items()):
            body = {"jsonrpc": "2.0", "id": i, "method": method, "params": {**params, "_meta": META}}
            r = await http.post(server.url, json=body, headers={**headers, "mcp-method": method})
            assert r.status_code == 404, (method, r.status_code, r.text)
            reply = r.json()
            assert reply["id"] == i and reply["error"]["code"] == -32601, (method, reply)
    # A 2025-11-25 client still initialises and sets its level over the same endpoint.
    async with wf.http_client(server, "legacy") as c:
        with anyio.fail_after(OP_TIMEOUT):
            await c.set_logging_level("warning")


@pytest.mark.parametrize("mode", ["legacy", "auto"])
async def test_a_resource_nobody_serves_is_an_error_carrying_its_uri(wf: Wf, mode: str) -> None:
    server = wf.start_http("127.0.0.1", None, "--config", str(wf.write_config(toml_config({}))))
    async with wf.http_client(server, mode) as c:
        with anyio.fail_after(OP_TIMEOUT), pytest.raises(MCPError) as e:
            await c.read_resource("nothing://here")
    assert e.value.data == {"uri": "nothing://here"}, (e.value.code, e.value.message, e.value.data)


LOG_CONFIG = """\
[server]
http_token = "${E2E_DEFAULT_TOKEN}"

[[server.tokens]]
name = "alice"
token = "${E2E_ALICE_TOKEN}"

[[server.tokens]]
name = "bob"
token = "${E2E_BOB_TOKEN}"
deny_tools = ["everything__*"]

[sources.everything]
command = "EVERYTHING"
"""

SEVERE = {"warning", "error", "critical", "alert", "emergency"}


async def test_upstream_logs_outside_a_call_reach_a_2026_client_on_its_listen_stream(
    wf: Wf, everything_bin: Path
) -> None:
    """server-everything logs every 5 s once toggled on, with no call in flight. Alice
    (a 2026-07-28 client, `log_level="warning"`) hears them on her listen stream, none
    below warning; Bob, who may not use `everything__*`, hears none on his."""
    tokens = {k: f"{k}-{uuid.uuid4().hex}" for k in ("default", "alice", "bob")}
    config = wf.write_config(LOG_CONFIG.replace("EVERYTHING", str(everything_bin)))
    env = {f"E2E_{k.upper()}_TOKEN": v for k, v in tokens.items()}
    server = wf.start_http("127.0.0.1", None, "--config", str(config), env=env)
    alice, bob = Answerer(), Answerer()
    async with (
        as_principal(server.url, tokens["alice"], "auto", log_level="warning", logging_callback=alice.log) as a,
        as_principal(server.url, tokens["bob"], "auto", log_level="debug", logging_callback=bob.log) as b,
    ):
        assert a.protocol_version == "2026-07-28", a.protocol_version
        await wait_listed(a, "everything__toggle-simulated-logging")
        async with a.listen(tools_list_changed=True), b.listen(tools_list_changed=True):
            with anyio.fail_after(OP_TIMEOUT):
                r = await a.call_tool("everything__toggle-simulated-logging", {})
                assert not r.is_error, r
            # At least one message after the call returned: it belongs to no call.
            after_call = len(alice.logs)
            await alice.wait_logs(after_call + 1, timeout=90)
            with anyio.fail_after(OP_TIMEOUT):
                await a.call_tool("everything__toggle-simulated-logging", {})
    assert all(m.level in SEVERE for m in alice.logs), [(m.level, m.data) for m in alice.logs]
    assert all((m.logger or "").startswith("everything") for m in alice.logs), [m.logger for m in alice.logs]
    assert bob.logs == [], [(m.level, m.data) for m in bob.logs]
