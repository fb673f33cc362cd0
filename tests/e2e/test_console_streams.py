"""The console's live event stream is bounded per principal (issue #12):
`[server] max_console_streams_per_principal` streams may be open at once for
one token; the next is refused with 429 and a message naming the limit, a
closed stream frees its slot, and another principal's streams are counted
apart. Driven over real HTTP connections."""

from __future__ import annotations

import contextlib

import anyio
import httpx2
import pytest

from conftest import Wf
from console_support import start_console

pytestmark = pytest.mark.anyio

OP_TIMEOUT = 60
LIMIT = 3
OPS = "console-ops-0123456789abcdef"


async def open_stream(stack: contextlib.AsyncExitStack, base: str, headers: dict[str, str]):
    """An event stream on its own connection, open and subscribed (its `ready` frame read)."""
    http = await stack.enter_async_context(httpx2.AsyncClient(base_url=base, timeout=OP_TIMEOUT))
    r = await stack.enter_async_context(http.stream("GET", "/console/api/events", headers=headers))
    assert r.status_code == 200, r.status_code
    # One byte iterator, kept by the stack until the end: a collected (closed)
    # one would close the connection.
    chunks = r.aiter_raw()
    stack.push_async_callback(chunks.aclose)
    text = b""
    with anyio.fail_after(OP_TIMEOUT):
        while b"\n\n" not in text:
            text += await chunks.__anext__()
    assert text.split(b"\n\n")[0] == b'data: {"type":"ready"}', text
    return r


async def try_stream(base: str, headers: dict[str, str]) -> httpx2.Response:
    """A stream request on a new connection: its answer if refused, else
    (200) closed at once."""
    async with (
        httpx2.AsyncClient(base_url=base, timeout=OP_TIMEOUT) as http,
        http.stream("GET", "/console/api/events", headers=headers) as r,
    ):
        if r.status_code != 200:
            await r.aread()
        return r


async def test_streams_beyond_the_per_principal_limit_are_refused_until_one_closes(wf: Wf) -> None:
    console = start_console(
        wf,
        f"\n[server]\nmax_console_streams_per_principal = {LIMIT}\n"
        '\n[[server.tokens]]\nname = "ops"\ntoken = "${E2E_OPS_TOKEN}"\n',
        env={"E2E_OPS_TOKEN": OPS},
    )
    default = console.auth()
    ops = {**console.auth(), "Authorization": f"Bearer {OPS}"}
    base = console.server.base_url
    async with contextlib.AsyncExitStack() as stack:
        first = await open_stream(stack, base, default)
        for _ in range(LIMIT - 1):
            await open_stream(stack, base, default)
        # One more for the same principal: 429, saying why.
        r = await try_stream(base, default)
        assert r.status_code == 429, (r.status_code, r.text)
        body = r.json()
        assert f"too many console event streams open for principal \"default\" (limit {LIMIT})" == body["error"], body
        assert "max_console_streams_per_principal" in body["hint"], body
        # Another principal has its own slots.
        for _ in range(LIMIT):
            await open_stream(stack, base, ops)
        assert (await try_stream(base, ops)).status_code == 429
        # Other console requests of the full principal are still answered.
        async with httpx2.AsyncClient(base_url=base, timeout=OP_TIMEOUT) as http:
            r = await http.get("/console/api/sources", headers=default)
        assert r.status_code == 200, r.text
        # Closing one stream frees its slot once wf sees the connection end.
        await first.aclose()
        with anyio.fail_after(OP_TIMEOUT):
            while (r := await try_stream(base, default)).status_code != 200:
                assert r.status_code == 429, r.status_code
                await anyio.sleep(0.1)
    assert console.server.proc.poll() is None


async def test_a_zero_limit_stops_wf_with_a_clear_error(wf: Wf) -> None:
    config = wf.write_config("[server]\nmax_console_streams_per_principal = 0\n")
    r = wf.run("serve", "--http", "127.0.0.1:0", "--config", str(config), check=False)
    assert r.returncode != 0
    assert "server.max_console_streams_per_principal must be greater than 0" in r.stderr, r.stderr
