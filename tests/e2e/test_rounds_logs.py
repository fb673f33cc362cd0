"""A 2026-07-28 call's log messages after an input round reach the client through wf.

Over stateless HTTP every round of a call is its own request, answered on its own
stream, and the first is closed once it returned the `InputRequiredResult`. The fixture
upstream's `confirm` asks in a round and logs `confirmed` on its retry; the official
Python client in `auto` mode (with a log level, and an elicitation callback) must hear
that line, which belongs to the retry's request, not the closed first one.
"""

from __future__ import annotations

from pathlib import Path

import anyio
import pytest

from caller_support import ANSWER_NAME, Answerer
from conftest import UpstreamEvents, Wf, call_outcome, toml_config, wait_listed

pytestmark = pytest.mark.anyio

OP_TIMEOUT = 60


async def test_a_log_line_after_an_input_round_reaches_the_retrys_request(
    wf: Wf, fixture_upstream_bin: Path, upstream_events: UpstreamEvents
) -> None:
    settings = {"command": str(fixture_upstream_bin), "args": ["--asks", *upstream_events.args()]}
    server = wf.start_http("127.0.0.1", None, "--config", str(wf.write_config(toml_config({"fix": settings}))))
    a = Answerer()
    async with wf.http_client(server, "auto", log_level="warning", **a.callbacks()) as c:
        assert c.protocol_version == "2026-07-28", c.protocol_version
        await wait_listed(c, "fix__confirm")
        with anyio.fail_after(OP_TIMEOUT):
            r, err = await call_outcome(c, "fix__confirm", {})
        assert err is None, err
        assert r.structured_content["answer"]["content"]["name"] == ANSWER_NAME, r.structured_content
        assert [e.message for e in a.elicitations] == ["fixture asks your name"]
        # The line went out before the retry's answer, on the same stream.
        await a.wait_logs(1, timeout=OP_TIMEOUT)
    assert [(m.level, m.data) for m in a.logs] == [("warning", "confirmed")], a.logs
