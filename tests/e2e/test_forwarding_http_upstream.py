"""Server->client forwarding over an HTTP upstream: the Rust fixture upstream
(`wf-fixture-upstream --http --asks`) serves streamable HTTP, and wf's mcp source
keeps one shared session with it. A request the upstream sends back arrives on
the reply stream of one of wf's calls, which names the call and so its client:
two clients whose calls overlap on that one session each get their own request.
(Over stdio the same overlap is ambiguous and refused: test_forwarding_fixture.py.)
"""

from __future__ import annotations

from pathlib import Path

import anyio
import pytest

from conftest import UpstreamEvents, Wf, free_port, toml_config, wait_listed
from caller_support import ANSWER_NAME, SAMPLED, Answerer, overlapping_asks

pytestmark = pytest.mark.anyio

OP_TIMEOUT = 60
ASK = "fix__ask"


async def test_overlapping_calls_on_one_http_session_each_get_their_own_request(
    wf: Wf, fixture_upstream_bin: Path, upstream_events: UpstreamEvents, tmp_path: Path
) -> None:
    port = free_port()
    argv = [str(fixture_upstream_bin), "--asks", *upstream_events.args(), "--http", f"127.0.0.1:{port}"]
    url = wf.start_upstream_http("fixture-http", argv, port)
    config = wf.write_config(toml_config({"fix": {"url": url, "session": "shared", "protocol": "2025-11-25"}}))
    server = wf.start_http("127.0.0.1", None, "--config", str(config))
    first, second = Answerer(), Answerer()
    gate = tmp_path / "ask-now"
    async with (
        wf.http_client(server, "legacy", **first.callbacks()) as c1,
        wf.http_client(server, "legacy", **second.callbacks()) as c2,
    ):
        await wait_listed(c1, ASK)
        await wait_listed(c2, ASK)
        with anyio.fail_after(OP_TIMEOUT):
            # The fixture keeps one counter per HTTP session: both clients count on the same one.
            counts = [(await c.call_tool("fix__increment", {})).structured_content["count"] for c in (c1, c2)]
        assert counts == [1, 2], counts
        # Both calls are in flight on the one upstream session before either asks.
        results = await overlapping_asks(c1, c2, ASK, upstream_events, gate, OP_TIMEOUT)
    assert results["first"][1] is None and results["second"][1] is None, results
    assert len(first.elicitations) == 1 and first.samplings == []
    assert len(second.samplings) == 1 and second.elicitations == []
    events = [e for e in upstream_events.read() if e.get("event") == "asked"]
    got = {e["kind"]: e for e in events}
    assert len(events) == 2 and all(e["ok"] for e in events), events
    assert got["elicit"]["answer"]["content"]["name"] == ANSWER_NAME
    assert got["sample"]["answer"]["content"]["text"] == SAMPLED
    assert len({e["pid"] for e in events}) == 1
