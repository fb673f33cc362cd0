"""An upstream's input-required round as a whole, through wf: the TypeScript-SDK
upstream of the generation matrix (`ts_generations_upstream.mjs`, over stdio as wf's
child, default settings) asks several things in one round under keys of its own.

A 2026-07-28 client gets that round as ONE round of wf's, with every request under
the upstream's key (in key order); a 2025-11-25 client gets one server-to-client
request each. Either way the upstream gets all the answers back in ONE
`inputResponses`, under its keys. Answers a 2026-07-28 client sends with its first
call, before any round, answer the upstream's requests of those keys.
One `wf serve --http` serves the whole module.
"""

from __future__ import annotations

import json
import shutil
from collections.abc import Iterator
from typing import Any

import anyio
import pytest
from mcp import Client
from mcp_types import InputRequiredResult

from caller_support import ANSWER_NAME, ROOT_URI, SAMPLED, Answerer
from conftest import HttpServer, Wf, content_text, toml_config, wait_listed
from test_generations import UPSTREAM

pytestmark = pytest.mark.anyio

OP_TIMEOUT = 60
THREE = "ts__three_asks"
ELICIT = "ts__test_input_required_result_elicitation"


@pytest.fixture(scope="module")
def server(wf_module: Wf) -> Iterator[HttpServer]:
    node = shutil.which("node")
    if not node or not (UPSTREAM.parent / "node_modules" / "@modelcontextprotocol" / "server").is_dir():
        pytest.fail("node or @modelcontextprotocol/server is missing: run `npm ci` in tests/e2e (tests/run does)")
    config = wf_module.write_config(toml_config({"ts": {"command": node, "args": [str(UPSTREAM)]}}))
    yield wf_module.start_http("127.0.0.1", None, "--config", str(config))


def client(wf_module: Wf, server: HttpServer, mode: str, **kw: Any) -> Client:
    return wf_module.http_client(server, mode, **kw)


def echoed(result: Any) -> dict[str, Any]:
    assert not isinstance(result, InputRequiredResult), result
    assert not result.is_error, result
    return json.loads(content_text(result.content))


WANT = {"state": "three", "keys": ["capital", "where", "who"], "name": ANSWER_NAME, "said": SAMPLED, "roots": [ROOT_URI]}


async def test_a_2026_client_gets_the_upstreams_round_whole_under_its_keys(wf_module: Wf, server: HttpServer) -> None:
    """One round holds all three requests, under the upstream's keys in key order;
    the answers reach the upstream together, under the same keys."""
    async with client(wf_module, server, "auto", **Answerer().callbacks()) as c:
        await wait_listed(c, THREE)
        with anyio.fail_after(OP_TIMEOUT):
            r = await c.session.call_tool(THREE, {}, allow_input_required=True)
            assert isinstance(r, InputRequiredResult), r
            assert r.input_requests is not None and r.request_state
            assert list(r.input_requests) == ["capital", "where", "who"], r.input_requests
            methods = {k: v.method for k, v in r.input_requests.items()}
            assert methods == {"capital": "sampling/createMessage", "where": "roots/list", "who": "elicitation/create"}
            answers = {
                "who": {"action": "accept", "content": {"name": ANSWER_NAME}},
                "capital": {"role": "assistant", "content": {"type": "text", "text": SAMPLED}, "model": "m"},
                "where": {"roots": [{"uri": ROOT_URI}]},
            }
            done = await c.session.call_tool(
                THREE, {}, input_responses=answers, request_state=r.request_state, allow_input_required=True
            )
    assert echoed(done) == WANT


async def test_a_2025_client_gets_a_request_each_and_the_upstream_one_answer(wf_module: Wf, server: HttpServer) -> None:
    """The same round reaches a 2025-11-25 client as three requests, and their
    answers reach the upstream in one retry, under its keys."""
    a = Answerer()
    async with client(wf_module, server, "legacy", **a.callbacks()) as c:
        await wait_listed(c, THREE)
        with anyio.fail_after(OP_TIMEOUT):
            done = await c.call_tool(THREE, {})
    assert echoed(done) == WANT
    assert [e.message for e in a.elicitations] == ["What is your name?"]
    assert len(a.samplings) == 1 and a.roots_asked == 1


async def test_answers_sent_before_any_round_answer_the_upstreams_keys(wf_module: Wf, server: HttpServer) -> None:
    """A first call that already carries an answer under the upstream's key (and
    others it ignores) completes at once, as against the upstream directly; one
    whose answers match no key gets the round."""
    async with client(wf_module, server, "auto", **Answerer().callbacks()) as c:
        await wait_listed(c, ELICIT)
        with anyio.fail_after(OP_TIMEOUT):
            early = {
                "user_name": {"action": "accept", "content": {"name": "Alice"}},
                "unknown_extra_key": {"action": "accept", "content": {"foo": "bar"}},
            }
            done = await c.session.call_tool(ELICIT, {}, input_responses=early, allow_input_required=True)
            assert not isinstance(done, InputRequiredResult), done
            assert content_text(done.content) == "Hello, Alice!"
            other = {"someone": {"action": "accept", "content": {"name": "Bob"}}}
            r = await c.session.call_tool(ELICIT, {}, input_responses=other, allow_input_required=True)
            assert isinstance(r, InputRequiredResult), r
            assert list(r.input_requests or {}) == ["user_name"], r
