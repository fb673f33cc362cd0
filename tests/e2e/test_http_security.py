"""The streamable HTTP front: a public bind needs a bearer token, a loopback
bind rejects foreign Origin and Host headers (DNS rebinding), and the official
client still connects with its default headers."""

from __future__ import annotations

import subprocess
from collections.abc import Iterator

import anyio
import httpx2
import pytest
from mcp import Client
from mcp.client.streamable_http import streamable_http_client
from mcp.shared._httpx_utils import create_mcp_http_client

from conftest import HttpServer, Wf, all_tools, tail

OP_TIMEOUT = 30
# At least 16 characters: shorter tokens are refused at start.
TOKEN = "e2e-secret-0123456789"
INITIALIZE = {
    "jsonrpc": "2.0",
    "id": 1,
    "method": "initialize",
    "params": {
        "protocolVersion": "2025-11-25",
        "capabilities": {},
        "clientInfo": {"name": "wf-e2e", "version": "0"},
    },
}
MCP_HEADERS = {"Content-Type": "application/json", "Accept": "application/json, text/event-stream"}


@pytest.fixture
def http() -> Iterator[httpx2.Client]:
    with httpx2.Client(timeout=15, trust_env=False) as c:
        yield c


def post_status(http: httpx2.Client, url: str, headers: dict[str, str] | None = None) -> int:
    """POSTs an initialize request and returns the status (the body is not read:
    a streamed answer may stay open)."""
    with http.stream("POST", url, json=INITIALIZE, headers={**MCP_HEADERS, **(headers or {})}) as r:
        return r.status_code


def test_public_bind_without_token_refuses_to_start(wf: Wf) -> None:
    server = wf.start_http("0.0.0.0", wait=False)
    try:
        code = server.proc.wait(timeout=15)
    except subprocess.TimeoutExpired:
        pytest.fail(f"wf serve --http 0.0.0.0 without a token is still running:\n{tail(server.log)}")
    assert code != 0
    assert "token" in server.log.read_text(errors="replace").lower(), tail(server.log)


@pytest.fixture
def public_server(wf: Wf) -> HttpServer:
    return wf.start_http("0.0.0.0", env={"WF_HTTP_TOKEN": TOKEN})


def test_public_bind_requires_bearer_token(public_server: HttpServer, http: httpx2.Client) -> None:
    url = public_server.url
    assert post_status(http, url) == 401
    assert post_status(http, url, {"Authorization": "Bearer wrong"}) == 401
    assert post_status(http, url, {"Authorization": TOKEN}) == 401
    # Same length as the token, last character wrong.
    assert post_status(http, url, {"Authorization": f"Bearer {TOKEN[:-1]}X"}) == 401
    assert post_status(http, url, {"Authorization": f"Bearer {TOKEN}"}) == 200


@pytest.mark.anyio
@pytest.mark.parametrize("mode", ["auto", "legacy"])
async def test_client_with_token_on_public_bind(public_server: HttpServer, mode: str) -> None:
    async with create_mcp_http_client(headers={"Authorization": f"Bearer {TOKEN}"}) as h:
        transport = streamable_http_client(public_server.url, http_client=h)
        async with Client(transport, mode=mode, cache=None, read_timeout_seconds=OP_TIMEOUT) as c:
            with anyio.fail_after(OP_TIMEOUT):
                names = {t.name for t in await all_tools(c)}
    assert "wf_std__const" in names


def test_loopback_rejects_foreign_origin_and_host(http_server: HttpServer, http: httpx2.Client) -> None:
    url = http_server.url
    assert post_status(http, url, {"Origin": "http://evil.example"}) == 403
    assert post_status(http, url, {"Host": "evil.example"}) == 403
    assert post_status(http, url, {"Host": f"evil.example:{http_server.port}"}) == 403


def test_loopback_accepts_local_origin_and_host(http_server: HttpServer, http: httpx2.Client) -> None:
    url, port = http_server.url, http_server.port
    for headers in (
        {},
        {"Origin": f"http://127.0.0.1:{port}"},
        {"Origin": f"http://localhost:{port}"},
        {"Host": f"localhost:{port}"},
        {"Host": f"127.0.0.1:{port}"},
    ):
        status = post_status(http, url, headers)
        assert status == 200, (headers, status)


@pytest.mark.anyio
@pytest.mark.parametrize("mode", ["auto", "legacy"])
async def test_client_default_headers_on_loopback(wf: Wf, http_server: HttpServer, mode: str) -> None:
    async with wf.http_client(http_server, mode) as c:
        with anyio.fail_after(OP_TIMEOUT):
            names = {t.name for t in await all_tools(c)}
            result = await c.call_tool("wf_std__const", {"value": "x"})
    assert "wf_std__const" in names
    assert result.structured_content == {"value": "x"}


def test_server_stops_on_sigterm(http_server: HttpServer) -> None:
    """Teardown relies on this: SIGTERM ends `wf serve --http` promptly."""
    http_server.proc.terminate()
    try:
        code = http_server.proc.wait(timeout=10)
    except subprocess.TimeoutExpired:
        pytest.fail("wf serve --http ignored SIGTERM for 10s")
    # A clean shutdown, not a crash or a kill.
    assert code == 0, tail(http_server.log)
    assert "shutting down" in http_server.log.read_text(errors="replace"), tail(http_server.log)


@pytest.mark.parametrize(
    ("token", "says"),
    [(" ", "is empty"), ("", "is empty"), ("short-token", "at least 16"), ("0123456789 abcdef", "printable ASCII")],
)
def test_weak_tokens_are_refused_at_start(wf: Wf, token: str, says: str) -> None:
    server = wf.start_http("127.0.0.1", env={"WF_HTTP_TOKEN": token}, wait=False)
    try:
        code = server.proc.wait(timeout=15)
    except subprocess.TimeoutExpired:
        pytest.fail(f"wf serve with WF_HTTP_TOKEN={token!r} is still running:\n{tail(server.log)}")
    assert code == 1, tail(server.log)
    assert says in server.log.read_text(errors="replace"), tail(server.log)


def test_weak_config_token_is_refused_at_start(wf: Wf) -> None:
    cfg = wf.write_config('[server]\nhttp_token = "${E2E_TOKEN}"\n')
    server = wf.start_http("127.0.0.1", None, "--config", str(cfg), env={"E2E_TOKEN": "tiny"}, wait=False)
    try:
        code = server.proc.wait(timeout=15)
    except subprocess.TimeoutExpired:
        pytest.fail(f"wf serve with a 4-character token is still running:\n{tail(server.log)}")
    assert code == 1, tail(server.log)
    assert "at least 16" in server.log.read_text(errors="replace"), tail(server.log)


@pytest.mark.parametrize(
    ("admin", "reason"),
    [
        ('over_http = "token"\ntoken = "${E2E_ADMIN}"', "the admin token ([admin] token) is 11 characters long"),
        ('token = ""', "the admin token ([admin] token) is empty"),
    ],
    ids=["short", "empty"],
)
def test_weak_admin_token_is_refused_at_start(wf: Wf, admin: str, reason: str) -> None:
    """The admin token follows the bearer token's rules when HTTP admin calls need it."""
    cfg = wf.write_config(f"[admin]\n{admin}\n")
    server = wf.start_http("127.0.0.1", None, "--config", str(cfg), env={"E2E_ADMIN": "short-admin"}, wait=False)
    try:
        code = server.proc.wait(timeout=15)
    except subprocess.TimeoutExpired:
        pytest.fail(f"wf serve with a weak admin token is still running:\n{tail(server.log)}")
    assert code == 1, tail(server.log)
    assert reason in server.log.read_text(errors="replace"), tail(server.log)


def test_host_and_origin_are_parsed_not_matched_as_text(http_server: HttpServer, http: httpx2.Client) -> None:
    """IPv6 literals, ports, case and trailing dots, over a real socket."""
    url, port = http_server.url, http_server.port
    for host in ("[::1]evil.com", f"[::1]evil.com:{port}", "[::1].evil.com", f"localhost.evil.com:{port}", f"user@localhost:{port}", "[::1"):
        assert post_status(http, url, {"Host": host}) == 403, host
    for origin in ("http://[::1]evil.com", f"http://[::1]evil.com:{port}", "http://localhost.evil.com", f"http://localhost:{port}@evil.com", "null"):
        assert post_status(http, url, {"Origin": origin}) == 403, origin
    for host in (f"[::1]:{port}", "[0:0:0:0:0:0:0:1]", f"LOCALHOST.:{port}", "127.0.0.1."):
        assert post_status(http, url, {"Host": host}) == 200, host
    for origin in (f"http://[::1]:{port}", "http://LOCALHOST.:3000", "https://127.0.0.1"):
        assert post_status(http, url, {"Origin": origin}) == 200, origin


def test_allowed_hosts_and_origins_from_the_config(wf: Wf, http: httpx2.Client) -> None:
    cfg = wf.write_config(
        '[server]\nallowed_hosts = ["wf.example:8443", "fd00::5"]\nallowed_origins = ["https://app.example"]\n'
    )
    server = wf.start_http("127.0.0.1", None, "--config", str(cfg))
    url = server.url
    for host, status in (("wf.example:8443", 200), ("WF.example.:8443", 200), ("wf.example", 403), ("wf.example:443", 403), ("[fd00::5]:1", 200), ("[fd00::5]x", 403)):
        assert post_status(http, url, {"Host": host}) == status, host
    for origin, status in (("https://app.example", 200), ("https://app.example:443", 200), ("http://app.example", 403), ("https://app.example.evil.com", 403)):
        assert post_status(http, url, {"Origin": origin}) == status, origin


def test_unparsable_allowed_host_is_refused_at_start(wf: Wf) -> None:
    cfg = wf.write_config('[server]\nallowed_hosts = ["[::1]evil.com"]\n')
    server = wf.start_http("127.0.0.1", None, "--config", str(cfg), wait=False)
    try:
        code = server.proc.wait(timeout=15)
    except subprocess.TimeoutExpired:
        pytest.fail(f"wf serve with a bad allowed_hosts entry is still running:\n{tail(server.log)}")
    assert code == 1, tail(server.log)
    assert "server.allowed_hosts" in server.log.read_text(errors="replace"), tail(server.log)
