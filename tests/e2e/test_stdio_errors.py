"""What a stdio client that sends something wrong gets back: an exact
JSON-RPC error for every request (never silence), a logged refusal for a
line over the size limit, and a host that keeps serving."""

from __future__ import annotations

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
