"""What a stdio client that sends something wrong gets back: an exact
JSON-RPC error for every request (never silence), a logged refusal for a
line over the size limit, and a host that keeps serving."""

from __future__ import annotations

import time

from conftest import Wf, tail
from hardening_support import RawStdio, log_lines

OP_TIMEOUT = 30


def start(wf: Wf, *extra: str) -> RawStdio:
    return RawStdio([str(wf.bin), *wf.serve_args(*extra)], wf.root, wf.env(), wf.new_log("stdio-raw"))


def call(id_: int, value: object) -> dict:
    return {"jsonrpc": "2.0", "id": id_, "method": "tools/call", "params": {"name": "wf_std__const", "arguments": {"value": value}}}


def test_every_bad_line_gets_an_exact_error_and_the_host_stays_up(wf: Wf) -> None:
    cfg = wf.write_config("[server]\nmax_request_bytes = 4096\n")
    s = start(wf, "--config", str(cfg))
    try:
        s.initialize(OP_TIMEOUT)
        # Not JSON: -32700, id null (rmcp alone says nothing).
        s.send(b"this is not json\n")
        r = s.reply(OP_TIMEOUT)
        assert (r["id"], r["error"]["code"]) == (None, -32700), r
        # Ill-typed arguments: -32602 for that id (rmcp alone says -32601).
        s.send({"jsonrpc": "2.0", "id": 2, "method": "tools/call", "params": {"name": "wf_std__const", "arguments": [1]}})
        r = s.reply(OP_TIMEOUT)
        assert (r["id"], r["error"]["code"]) == (2, -32602), r
        # Over the limit with a readable id: an error for that id.
        s.send(call(3, "x" * 10_000))
        r = s.reply(OP_TIMEOUT)
        assert (r["id"], r["error"]["code"]) == (3, -32600), r
        assert "4096" in r["error"]["message"], r
        # Over the limit with no id in sight: an error with id null, and a log line.
        s.send(b'{"params":{"junk":"' + b"y" * 10_000 + b'"},"id":4,"jsonrpc":"2.0","method":"ping"}\n')
        r = s.reply(OP_TIMEOUT)
        assert (r["id"], r["error"]["code"]) == (None, -32600), r
        # A notification that does not parse is never answered: the next reply is for id 5.
        s.send({"jsonrpc": "1.0", "method": "notifications/whatever"})
        s.send(call(5, "still here"))
        r = s.reply(OP_TIMEOUT)
        assert r["id"] == 5 and r["result"]["structuredContent"] == {"value": "still here"}, r
        # A message just under the limit is served.
        s.send(call(6, "z" * 3900))
        r = s.reply(OP_TIMEOUT)
        assert r["id"] == 6 and "result" in r, r
    finally:
        code = s.close()
    assert code == 0, tail(s.log)
    refusals = log_lines(s.log, "refused a client message over the size limit")
    assert len(refusals) == 2, tail(s.log)
    assert "id=3" in refusals[0] and "id=unreadable" in refusals[1], refusals


def sleep_call(id_: int, ms: int) -> dict:
    return {"jsonrpc": "2.0", "id": id_, "method": "tools/call", "params": {"name": "wf_std__sleep", "arguments": {"ms": ms}}}


def test_a_client_with_max_calls_per_client_in_progress_is_refused_more_until_one_ends(wf: Wf) -> None:
    """`[server] max_calls_per_client`: a stdio client that pipelines more calls
    than that gets -32000 naming the limit for the extra one, at once; the calls
    in progress finish, and their slots serve the next call."""
    cfg = wf.write_config("[server]\nmax_calls_per_client = 2\n")
    s = start(wf, "--config", str(cfg))
    try:
        s.initialize(OP_TIMEOUT)
        s.send(sleep_call(10, 5000))
        s.send(sleep_call(11, 5000))
        # Each request is a task of its own, and tokio runs the newest first:
        # let the two sleeps take their slots before the next call arrives.
        time.sleep(0.5)
        s.send(call(12, "one too many"))
        r = s.reply(OP_TIMEOUT)
        assert r["id"] == 12 and r.get("error", {}).get("code") == -32000, r
        assert "max_calls_per_client = 2" in r["error"]["message"], r
        done = {s.reply(OP_TIMEOUT)["id"] for _ in range(2)}
        assert done == {10, 11}
        s.send(call(13, "room again"))
        r = s.reply(OP_TIMEOUT)
        assert r["id"] == 13 and r["result"]["structuredContent"] == {"value": "room again"}, r
    finally:
        code = s.close()
    assert code == 0, tail(s.log)
    assert len(log_lines(s.log, "too many calls in progress for one client")) == 1, tail(s.log)


def test_max_calls_per_client_zero_is_refused_at_start(wf: Wf) -> None:
    cfg = wf.write_config("[server]\nmax_calls_per_client = 0\n")
    done = wf.run(*wf.serve_args("--config", str(cfg)), timeout=30)
    assert done.returncode != 0
    assert "server.max_calls_per_client must be greater than 0" in done.stderr, done.stderr
