"""A 2026-07-28 client (stateless, multi round-trip) through wf, against the
Rust fixture upstream (`wf-fixture-upstream --asks`, over stdio as wf's child,
recording in its `--events` journal what came back for each request it sent).

An upstream that asks for input mid-call cannot reach a 2026-07-28 client with
a request: wf answers the client's call with an `InputRequiredResult` holding
the upstream's request and an opaque `requestState`, keeps the upstream call
pending, and completes it when the client retries with `inputResponses`. The
official `mcp` client in `mode="auto"` drives those rounds through its
callbacks; the tests that check the rounds themselves drive them by hand
(`allow_input_required=True`).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import anyio
import httpx2
import pytest
from mcp import Client
from mcp.shared.exceptions import MCPError
from mcp_types import InputRequiredResult

from conftest import UpstreamEvents, Wf, call_outcome, toml_config, wait_listed
from caller_support import ANSWER_NAME, ROOT_URI, SAMPLED, Answerer

pytestmark = pytest.mark.anyio

OP_TIMEOUT = 60
ASK = "fix__ask"
FRONTS = ["stdio", "http"]


def client(
    wf: Wf,
    fixture_upstream_bin: Path,
    events: UpstreamEvents,
    front: str,
    server: dict[str, Any] | None = None,
    sources: tuple[str, ...] = ("fix",),
    **kw: Any,
) -> Client:
    settings = {
        "command": str(fixture_upstream_bin),
        "args": ["--asks", *events.args()],
        "session": "shared",
        "protocol": "2025-11-25",  # an upstream that asks with requests
    }
    config = wf.write_config(toml_config({name: settings for name in sources}, server=server))
    if front == "stdio":
        return wf.stdio_client("auto", "--config", str(config), **kw)
    return wf.http_client(wf.start_http("127.0.0.1", None, "--config", str(config)), "auto", **kw)


def asked(events: UpstreamEvents) -> list[dict[str, Any]]:
    return [e for e in events.read() if e.get("event") == "asked"]


async def first_round(c: Client, kind: str = "elicit") -> InputRequiredResult:
    r = await c.session.call_tool(ASK, {"kind": kind}, allow_input_required=True)
    assert isinstance(r, InputRequiredResult), r
    return r


async def wait_event(events: UpstreamEvents, match: Any, timeout: float = OP_TIMEOUT) -> dict[str, Any]:
    """The first journal event `match` accepts, once the upstream wrote it."""
    with anyio.fail_after(timeout):
        while True:
            for e in events.read():
                if match(e):
                    return e
            await anyio.sleep(0.05)


@pytest.mark.parametrize("front", FRONTS)
async def test_a_2026_client_answers_the_upstream_in_rounds(
    wf: Wf, fixture_upstream_bin: Path, upstream_events: UpstreamEvents, front: str
) -> None:
    """Form and URL elicitation, sampling and roots: the client's callbacks answer
    through input-required rounds, and the upstream gets each answer."""
    a = Answerer()
    async with client(wf, fixture_upstream_bin, upstream_events, front, **a.callbacks()) as c:
        assert c.protocol_version == "2026-07-28", c.protocol_version
        await wait_listed(c, ASK)
        with anyio.fail_after(OP_TIMEOUT):
            for kind in ("elicit", "url", "sample", "roots"):
                result, err = await call_outcome(c, ASK, {"kind": kind})
                assert err is None, err
                assert result is not None
    got = {e["kind"]: e for e in asked(upstream_events)}
    assert all(e["ok"] for e in got.values()), got
    assert got["elicit"]["answer"]["action"] == "accept"
    assert got["elicit"]["answer"]["content"] == {"name": ANSWER_NAME, "check": True}
    assert got["url"]["answer"]["action"] == "accept"
    assert got["sample"]["answer"]["content"]["text"] == SAMPLED
    assert got["roots"]["answer"]["roots"][0]["uri"] == ROOT_URI
    assert [e.message for e in a.elicitations] == ["fixture asks your name", "open this"]
    assert len(a.samplings) == 1 and a.roots_asked == 1


async def test_a_round_carries_the_upstream_request_and_an_opaque_single_use_state(
    wf: Wf, fixture_upstream_bin: Path, upstream_events: UpstreamEvents
) -> None:
    """The first answer is an InputRequiredResult with the upstream's own request;
    a made-up state is refused; the real one completes the call, once."""
    async with client(wf, fixture_upstream_bin, upstream_events, "http", **Answerer().callbacks()) as c:
        await wait_listed(c, ASK)
        with anyio.fail_after(OP_TIMEOUT):
            r = await first_round(c)
            assert r.request_state and r.input_requests and len(r.input_requests) == 1, r
            (key, req), = r.input_requests.items()
            assert req.method == "elicitation/create", req
            assert req.params.message == "fixture asks your name", req
            # The upstream call is still pending: nothing answered it yet.
            assert asked(upstream_events) == []

            answer = {key: {"action": "accept", "content": {"name": "Grace"}}}
            with pytest.raises(MCPError, match="unknown requestState"):
                await c.session.call_tool(
                    ASK, {"kind": "elicit"}, input_responses=answer, request_state=r.request_state + "x",
                    allow_input_required=True,
                )
            done = await c.session.call_tool(
                ASK, {"kind": "elicit"}, input_responses=answer, request_state=r.request_state,
                allow_input_required=True,
            )
            assert not isinstance(done, InputRequiredResult), done
            assert not done.is_error, done
            # Single use: the same state again names nothing.
            with pytest.raises(MCPError, match="unknown requestState"):
                await c.session.call_tool(
                    ASK, {"kind": "elicit"}, input_responses=answer, request_state=r.request_state,
                    allow_input_required=True,
                )
    (e,) = asked(upstream_events)
    assert e["ok"] and e["answer"] == {"action": "accept", "content": {"name": "Grace"}}, e


async def test_a_state_only_resumes_the_request_that_got_it(
    wf: Wf, fixture_upstream_bin: Path, upstream_events: UpstreamEvents
) -> None:
    """A state used on another request (here another tool) is refused and stays usable."""
    async with client(wf, fixture_upstream_bin, upstream_events, "http", **Answerer().callbacks()) as c:
        await wait_listed(c, ASK)
        with anyio.fail_after(OP_TIMEOUT):
            r = await first_round(c, "roots")
            (key,) = r.input_requests
            answer = {key: {"roots": [{"uri": ROOT_URI}]}}
            with pytest.raises(MCPError, match="unknown requestState"):
                await c.session.call_tool(
                    "fix__get_count", {}, input_responses=answer, request_state=r.request_state,
                    allow_input_required=True,
                )
            done = await c.session.call_tool(
                ASK, {"kind": "roots"}, input_responses=answer, request_state=r.request_state,
                allow_input_required=True,
            )
            assert not isinstance(done, InputRequiredResult) and not done.is_error, done
    (e,) = asked(upstream_events)
    assert e["ok"] and e["answer"]["roots"][0]["uri"] == ROOT_URI, e


async def test_a_call_whose_client_never_retries_is_ended_after_its_wait(
    wf: Wf, fixture_upstream_bin: Path, upstream_events: UpstreamEvents
) -> None:
    """`[server] input_wait_ms`: the pending upstream call is cancelled (the upstream
    sees `notifications/cancelled` for it) and its state is refused afterwards."""
    server = {"input_wait_ms": 1000}
    async with client(wf, fixture_upstream_bin, upstream_events, "http", server, **Answerer().callbacks()) as c:
        await wait_listed(c, ASK)
        with anyio.fail_after(OP_TIMEOUT):
            r = await first_round(c)
        call = await wait_event(upstream_events, lambda e: e.get("event") == "call" and e.get("tool") == "ask")
        await wait_event(
            upstream_events, lambda e: e.get("event") == "cancelled" and e.get("request_id") == call["request_id"]
        )
        (key,) = r.input_requests
        with anyio.fail_after(OP_TIMEOUT), pytest.raises(MCPError, match="unknown requestState"):
            await c.session.call_tool(
                ASK, {"kind": "elicit"}, input_responses={key: {"action": "decline"}},
                request_state=r.request_state, allow_input_required=True,
            )
    assert asked(upstream_events) == [] or not asked(upstream_events)[0]["ok"]


async def test_the_calls_waiting_for_input_are_bounded(
    wf: Wf, fixture_upstream_bin: Path, upstream_events: UpstreamEvents
) -> None:
    """`[server] max_waiting_inputs = 1`: a second call that asks while one waits is
    refused with a clear error and its upstream call cancelled; the first still completes.
    (Two upstreams: on one shared stdio session, the second ask could not be routed at all.)"""
    server = {"max_waiting_inputs": 1}
    sources = ("fix", "fix2")
    async with client(wf, fixture_upstream_bin, upstream_events, "http", server, sources, **Answerer().callbacks()) as c:
        await wait_listed(c, ASK)
        await wait_listed(c, "fix2__ask")
        with anyio.fail_after(OP_TIMEOUT):
            r = await first_round(c)
            with pytest.raises(MCPError, match="too many calls wait"):
                await c.session.call_tool("fix2__ask", {"kind": "sample"}, allow_input_required=True)
        second = await wait_event(
            upstream_events, lambda e: e.get("event") == "call" and e.get("kind") == "sample"
        )
        # wf ends the refused call before it fails the call's request for input, so
        # the upstream is told `notifications/cancelled`. The two travel on
        # different threads: an upstream that sees the failed request first ends
        # the call itself (its `asked` is not ok). Either way nothing is left running.
        await wait_event(
            upstream_events,
            lambda e: (e.get("event") == "cancelled" and e.get("request_id") == second["request_id"])
            or (e.get("event") == "asked" and e.get("kind") == "sample" and not e.get("ok")),
        )
        with anyio.fail_after(OP_TIMEOUT):
            (key,) = r.input_requests
            done = await c.session.call_tool(
                ASK, {"kind": "elicit"}, input_responses={key: {"action": "decline"}},
                request_state=r.request_state, allow_input_required=True,
            )
            assert not isinstance(done, InputRequiredResult) and not done.is_error, done
    got = {e["kind"]: e for e in asked(upstream_events)}
    assert got["elicit"]["ok"] and got["elicit"]["answer"] == {"action": "decline"}, got


async def test_a_2026_client_without_the_capability_makes_the_upstream_see_an_error(
    wf: Wf, fixture_upstream_bin: Path, upstream_events: UpstreamEvents
) -> None:
    """No round for what the client cannot answer: the upstream gets method-not-found."""
    a = Answerer()
    async with client(wf, fixture_upstream_bin, upstream_events, "stdio", **a.callbacks(elicit=False)) as c:
        await wait_listed(c, ASK)
        with anyio.fail_after(OP_TIMEOUT):
            r = await c.session.call_tool(ASK, {"kind": "elicit"}, allow_input_required=True)
            assert not isinstance(r, InputRequiredResult), r
    (e,) = asked(upstream_events)
    assert e["ok"] is False and e["error"]["code"] == -32601, e
    assert "elicitation" in e["error"]["message"], e


# ---- The reverse: a 2026-07-28 upstream (`protocol = "2026-07-28"`) asks in rounds.


def modern_upstream_client(
    wf: Wf, fixture_upstream_bin: Path, events: UpstreamEvents, front: str, mode: str, **kw: Any
) -> Client:
    settings = {
        "command": str(fixture_upstream_bin),
        "args": ["--asks", *events.args()],
        "session": "shared",
        "protocol": "2026-07-28",
    }
    config = wf.write_config(toml_config({"fix": settings}))
    if front == "stdio":
        return wf.stdio_client(mode, "--config", str(config), **kw)
    return wf.http_client(wf.start_http("127.0.0.1", None, "--config", str(config)), mode, **kw)


@pytest.mark.parametrize(("front", "mode"), [("stdio", "legacy"), ("http", "legacy"), ("http", "auto")])
async def test_a_2026_upstreams_rounds_are_answered_by_the_calling_client(
    wf: Wf, fixture_upstream_bin: Path, upstream_events: UpstreamEvents, front: str, mode: str
) -> None:
    """The upstream answers wf's call with an InputRequiredResult; wf asks its own client
    (a request to a 2025-11-25 client, a round of its own to a 2026-07-28 one) and
    retries upstream with the answer and the upstream's requestState."""
    a = Answerer()
    async with modern_upstream_client(wf, fixture_upstream_bin, upstream_events, front, mode, **a.callbacks()) as c:
        await wait_listed(c, ASK)
        with anyio.fail_after(OP_TIMEOUT):
            for kind in ("elicit", "sample", "roots"):
                _, err = await call_outcome(c, ASK, {"kind": kind})
                assert err is None, err
    got = {e["kind"]: e for e in asked(upstream_events)}
    assert all(e["round"] and e["ok"] and e["state"] == "fixture-state" for e in got.values()), got
    assert got["elicit"]["answer"]["content"] == {"name": ANSWER_NAME, "check": True}
    assert got["sample"]["answer"]["content"]["text"] == SAMPLED
    assert got["roots"]["answer"]["roots"][0]["uri"] == ROOT_URI
    assert [e.message for e in a.elicitations] == ["fixture asks your name"]
    assert len(a.samplings) == 1 and a.roots_asked == 1


# ---- Cleanup from outside: a cancelled round, a client that goes away.


@pytest.mark.parametrize("front", FRONTS)
async def test_a_cancelled_round_ends_the_upstream_call_and_holds_no_slot(
    wf: Wf, fixture_upstream_bin: Path, upstream_events: UpstreamEvents, tmp_path: Path, front: str
) -> None:
    """The client cancels its call while the upstream works on it (the fixture waits for
    a file before it asks): the upstream sees `notifications/cancelled` for that request,
    and with `max_waiting_inputs = 1` the next call still gets its round."""
    server = {"max_waiting_inputs": 1}
    gate = tmp_path / "never"
    async with client(wf, fixture_upstream_bin, upstream_events, front, server, **Answerer().callbacks()) as c:
        await wait_listed(c, ASK)
        with anyio.fail_after(OP_TIMEOUT):
            async with anyio.create_task_group() as tg:
                tg.start_soon(
                    lambda: c.session.call_tool(ASK, {"kind": "elicit", "until": str(gate)}, allow_input_required=True)
                )
                call = await wait_event(upstream_events, lambda e: e.get("event") == "call" and e.get("tool") == "ask")
                tg.cancel_scope.cancel()
        await wait_event(
            upstream_events, lambda e: e.get("event") == "cancelled" and e.get("request_id") == call["request_id"]
        )
        with anyio.fail_after(OP_TIMEOUT):
            r = await first_round(c, "roots")
            (key,) = r.input_requests
            done = await c.session.call_tool(
                ASK, {"kind": "roots"}, input_responses={key: {"roots": [{"uri": ROOT_URI}]}},
                request_state=r.request_state, allow_input_required=True,
            )
            assert not isinstance(done, InputRequiredResult) and not done.is_error, done
    got = [e for e in asked(upstream_events) if e["kind"] == "roots"]
    assert len(got) == 1 and got[0]["ok"], got


async def test_a_stdio_client_that_goes_away_ends_its_waiting_call_upstream(
    wf: Wf, fixture_upstream_bin: Path, upstream_events: UpstreamEvents
) -> None:
    """A 2026-07-28 stdio client gets its round, then exits without retrying: wf ends
    the parked call at once (not after `input_wait_ms`, here an hour) and the upstream's
    request ends: it sees `notifications/cancelled` or an error answer to its question."""
    server = {"input_wait_ms": 3_600_000}
    async with client(wf, fixture_upstream_bin, upstream_events, "stdio", server, **Answerer().callbacks()) as c:
        await wait_listed(c, ASK)
        with anyio.fail_after(OP_TIMEOUT):
            await first_round(c)
        call = await wait_event(upstream_events, lambda e: e.get("event") == "call" and e.get("tool") == "ask")
        assert asked(upstream_events) == []
    ended = await wait_event(
        upstream_events,
        lambda e: (e.get("event") == "cancelled" and e.get("request_id") == call["request_id"])
        or (e.get("event") == "asked" and not e.get("ok")),
    )
    assert ended, ended


def stateless_call(url: str, name: str, arguments: dict[str, Any], headers: dict[str, str]) -> httpx2.Response:
    """One raw 2026-07-28 `tools/call` (no session), with `headers` added."""
    meta = {
        "io.modelcontextprotocol/protocolVersion": "2026-07-28",
        "io.modelcontextprotocol/clientCapabilities": {},
        "io.modelcontextprotocol/clientInfo": {"name": "e2e", "version": "0"},
    }
    body = {"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": {"name": name, "arguments": arguments, "_meta": meta}}
    base = {
        "content-type": "application/json",
        "accept": "application/json, text/event-stream",
        "mcp-protocol-version": "2026-07-28",
        "mcp-method": "tools/call",
        "mcp-name": name,
    }
    with httpx2.Client(timeout=OP_TIMEOUT, trust_env=False) as http:
        return http.post(url, json=body, headers={**base, **headers})


async def test_a_tools_mcp_param_headers_are_checked_against_its_schema_through_wf(
    wf: Wf, fixture_upstream_bin: Path, upstream_events: UpstreamEvents
) -> None:
    """SEP-2243 through wf's HTTP front: the upstream's `echo_header` marks `message`
    `x-mcp-header: Message`. The official client mirrors it into `Mcp-Param-Message`
    and is served; a raw request whose header disagrees with the body, or lacks it,
    is refused; a matching one is served. wf hands rmcp's check the tool's schema
    (`get_tool`), so without it both bad requests would be served."""
    settings = {"command": str(fixture_upstream_bin), "args": ["--asks", *upstream_events.args()], "session": "shared"}
    server = wf.start_http("127.0.0.1", None, "--config", str(wf.write_config(toml_config({"fix": settings}))))
    tool = "fix__echo_header"
    async with wf.http_client(server) as c:
        assert c.protocol_version == "2026-07-28", c.protocol_version
        await wait_listed(c, tool)
        with anyio.fail_after(OP_TIMEOUT):
            r = await c.call_tool(tool, {"message": "through wf"})
        assert not r.is_error and r.content[0].text == "through wf", r

    ok = stateless_call(server.url, tool, {"message": "same"}, {"mcp-param-message": "same"})
    assert ok.status_code == 200 and ok.json()["result"]["content"][0]["text"] == "same", ok.text
    for headers, why in [({"mcp-param-message": "other"}, "does not match"), ({}, "missing")]:
        r = stateless_call(server.url, tool, {"message": "same"}, headers)
        assert r.status_code != 200 or "error" in r.json(), (headers, r.text)
        assert "Mcp-Param-Message" in r.text and why in r.text, (headers, r.text)
