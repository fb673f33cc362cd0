"""wf as an OAuth 2.1 resource server (issue #50), end to end against the real
`wf serve --http`:

- a real authorization server (the pinned `oidc-provider`, users alice in
  `eng` and bob in `ops`, DCR and RFC 8707 resource indicators on) and the
  official `mcp` client's own OAuth flow: discovery through wf's 401 and its
  protected resource metadata, registration, authorization code with PKCE, a
  token for wf's `/mcp`. Each person sees and calls their group's tools and
  not the other's; a static token keeps working beside them; the metrics
  count requests per principal; no token reaches wf's log;
- refusals, each with its status and challenge, none hanging: another
  audience, expired, wrong issuer, bad signature, `alg: none`, an unknown
  `kid` (the keys fetched again once, then refused), a missing scope;
- a reload (the file watcher) takes a removed static token away from a live
  session and changes what a group may use, without a restart.
"""

from __future__ import annotations

import base64
import json
import time

import anyio
import httpx2
import jwt
import pytest
from cryptography.hazmat.primitives.asymmetric import ec

from conftest import Wf, all_tools, call_outcome, free_port
from oauth_rs_support import OP_TIMEOUT, IdP, KeyIssuer, signed_in, with_bearer
from upstream_support import wait_tools

pytestmark = pytest.mark.anyio

CI_TOKEN = "ci-static-token-0123456789abcdef"
METRICS_TOKEN = "metrics-secret-0123456789"
INIT = {
    "jsonrpc": "2.0",
    "id": 1,
    "method": "initialize",
    "params": {"protocolVersion": "2025-11-25", "capabilities": {}, "clientInfo": {"name": "e2e", "version": "1"}},
}


def config(issuer: str, resource: str, eng: list[str], ops: list[str], ci: bool = True, extra: str = "") -> str:
    tokens = f'[[server.tokens]]\nname = "ci"\ntoken = "{CI_TOKEN}"\n\n' if ci else ""
    return f"""\
[server]

{tokens}[server.oauth]
issuer = "{issuer}"
resource = "{resource}"
scopes = ["mcp"]
principal_claim = "email"
{extra}
[[server.oauth.groups]]
name = "eng"
allow_tools = {json.dumps(eng)}

[[server.oauth.groups]]
name = "ops"
allow_tools = {json.dumps(ops)}

[telemetry]
metrics_token = "{METRICS_TOKEN}"
"""


async def names(c) -> set[str]:
    with anyio.fail_after(OP_TIMEOUT):
        return {t.name for t in await all_tools(c)}


@pytest.mark.parametrize("mode", ["legacy", "auto"])
async def test_people_sign_in_with_their_identity_provider(wf: Wf, mode: str) -> None:
    port = free_port()
    resource = f"http://127.0.0.1:{port}/mcp"
    idp = IdP(wf.new_log("oidc-provider"), resource, {"alice": ["eng"], "bob": ["ops"]})
    try:
        cfg = wf.write_config(config(idp.issuer, resource, ["wf_std__const"], ["wf_std__sleep"]))
        # `wf check` reaches the IdP's metadata and keys; a bad setting or an
        # unreachable issuer fails it with the key named.
        proc = wf.run("check", "--config", str(cfg), *wf.plugin_args())
        assert proc.returncode == 0, proc.stderr
        assert f"oauth: {idp.issuer}: metadata and 2 signing key(s) fetched" in proc.stdout, proc.stdout
        dead = wf.write_config(config(f"http://127.0.0.1:{free_port()}", resource, [], []), "dead.toml")
        proc = wf.run("check", "--config", str(dead), *wf.plugin_args())
        assert proc.returncode == 1 and "server.oauth.issuer" in proc.stderr, proc.stderr
        bad = wf.write_config(config("http://idp.example", resource, [], []), "bad.toml")
        proc = wf.run("check", "--config", str(bad), *wf.plugin_args())
        assert proc.returncode == 1 and "must be an https URL" in proc.stderr, proc.stderr
        server = wf.start_http("127.0.0.1", port, "--config", str(cfg))

        # Without a token: 401 pointing at the metadata, which names the IdP.
        with httpx2.Client(timeout=10, trust_env=False) as http:
            r = http.post(server.url, json=INIT, headers={"accept": "application/json, text/event-stream"})
            assert r.status_code == 401, r.text
            challenge = r.headers["www-authenticate"]
            meta_url = f"http://127.0.0.1:{port}/.well-known/oauth-protected-resource/mcp"
            assert f'resource_metadata="{meta_url}"' in challenge, challenge
            meta = http.get(meta_url).json()
            assert meta["resource"] == resource and meta["authorization_servers"] == [idp.issuer], meta
            assert meta["scopes_supported"] == ["mcp"], meta

        tokens = []
        seen: dict[str, set[str]] = {}
        for user, mine, theirs in [("alice", "wf_std__const", "wf_std__sleep"), ("bob", "wf_std__sleep", "wf_std__const")]:
            async with signed_in(server.url, user, mode) as (c, storage, visited):
                # The client's own flow ran: registration, then the browser
                # went to the IdP with PKCE and the resource indicator.
                assert storage.client is not None and storage.client.client_id, "no dynamic registration"
                assert len(visited) == 1 and visited[0].startswith(f"{idp.issuer}/auth?"), visited
                assert "code_challenge_method=S256" in visited[0] and "resource=" in visited[0], visited[0]
                token = storage.tokens.access_token
                tokens.append(token)
                claims = json.loads(base64.urlsafe_b64decode(token.split(".")[1] + "=="))
                assert claims["aud"] == resource and claims["iss"] == idp.issuer, claims
                await wait_tools(c, mine)
                listed = await names(c)
                seen[user] = listed
                assert mine in listed and theirs not in listed, (user, listed)
                with anyio.fail_after(OP_TIMEOUT):
                    args = {"value": 7} if mine == "wf_std__const" else {"ms": 1}
                    ok = await c.call_tool(mine, args)
                    assert not ok.is_error, ok
                    _, error = await call_outcome(c, theirs, {"value": 1} if theirs == "wf_std__const" else {"ms": 1})
                    assert error is not None and f'principal "{user}@example.com"' in error, error
        assert not {n for n in seen["alice"] & seen["bob"] if n.startswith("wf_std__")}, seen

        # The static token works beside OAuth (all tools: no lists).
        async with with_bearer(server.url, CI_TOKEN) as c:
            listed = await names(c)
            assert {"wf_std__const", "wf_std__sleep"} <= listed, listed

        with httpx2.Client(timeout=10, trust_env=False) as http:
            text = http.get(f"{server.base_url}/metrics", headers={"Authorization": f"Bearer {METRICS_TOKEN}"}).text
        for who, via in [("alice@example.com", "oauth"), ("bob@example.com", "oauth"), ("ci", "token")]:
            assert f'wf_http_principal_requests_total{{principal="{who}",via="{via}"}}' in text, text
        server.stop()
        log = server.log.read_text()
        for t in tokens + [CI_TOKEN]:
            assert t not in log, "a token reached wf's log"
            assert t.split(".")[-1] not in log
    finally:
        idp.stop()


async def test_refusals_each_with_its_status(wf: Wf) -> None:
    issuer = KeyIssuer()
    try:
        port = free_port()
        resource = f"http://127.0.0.1:{port}/mcp"
        cfg = wf.write_config(config(issuer.issuer, resource, ["wf_std__const"], [], extra="jwks_min_refetch_s = 1\n"))
        server = wf.start_http("127.0.0.1", port, "--config", str(cfg))
        now = int(time.time())
        stranger = ec.generate_private_key(ec.SECP256R1())
        own_kid = issuer.keys[0][0]
        none_token = (
            base64.urlsafe_b64encode(json.dumps({"alg": "none", "kid": own_kid}).encode()).rstrip(b"=").decode()
            + "."
            + base64.urlsafe_b64encode(
                json.dumps({"iss": issuer.issuer, "aud": resource, "sub": "eve", "email": "eve@example.com", "scope": "mcp", "exp": now + 300}).encode()
            )
            .rstrip(b"=")
            .decode()
            + "."
        )

        def post(_http: httpx2.Client, token: str | None) -> httpx2.Response:
            # A fresh connection each time: a refusal is answered without
            # reading the request body, and then the connection is closed.
            h = {"accept": "application/json, text/event-stream"}
            if token:
                h["authorization"] = f"Bearer {token}"
            with httpx2.Client(timeout=10, trust_env=False) as http:
                return http.post(server.url, json=INIT, headers=h)

        with httpx2.Client(timeout=10, trust_env=False) as http:
            # Wait until wf fetched the keys at start (off the request path).
            good = issuer.mint(resource, "alice", ["eng"])
            deadline = time.monotonic() + 20
            while post(http, good).status_code != 200:
                assert time.monotonic() < deadline, "a good token never got through"
                time.sleep(0.1)
            cases = [
                ("other audience", issuer.mint(resource, "alice", ["eng"], aud="http://127.0.0.1:1/mcp"), 401),
                ("expired", issuer.mint(resource, "alice", ["eng"], exp=now - 300), 401),
                ("wrong issuer", issuer.mint(resource, "alice", ["eng"], iss="http://127.0.0.1:2"), 401),
                ("bad signature", issuer.mint(resource, "alice", ["eng"], kid=own_kid, key=stranger), 401),
                ("alg none", none_token, 401),
                ("HS256", jwt.encode({"iss": issuer.issuer, "aud": resource, "email": "e", "scope": "mcp", "exp": now + 300}, "x" * 32, algorithm="HS256", headers={"kid": own_kid}), 401),
                ("missing scope", issuer.mint(resource, "alice", ["eng"], scope="openid"), 403),
                ("opaque", "opaque-token-0123456789abcdef", 401),
            ]
            for what, token, status in cases:
                before = issuer.fetches
                t0 = time.monotonic()
                r = post(http, token)
                assert r.status_code == status, (what, r.status_code, r.text)
                assert time.monotonic() - t0 < 5, f"{what}: took {time.monotonic() - t0:.1f}s"
                challenge = r.headers["www-authenticate"]
                assert "resource_metadata=" in challenge, (what, challenge)
                want = "insufficient_scope" if status == 403 else "invalid_token"
                assert f'error="{want}"' in challenge, (what, challenge)
                assert issuer.fetches == before, f"{what}: the keys were fetched for it"

            # Key rotation: a token with a new kid fetches the keys once and passes.
            time.sleep(1.1)
            new_kid = issuer.add_key()
            issuer.published = list(issuer.keys)
            before = issuer.fetches
            assert post(http, issuer.mint(resource, "alice", ["eng"], kid=new_kid)).status_code == 200
            assert issuer.fetches == before + 1
            # A kid the issuer never had: fetched once more, then refused; a
            # second one within jwks_min_refetch_s fetches nothing.
            time.sleep(1.1)
            before = issuer.fetches
            r = post(http, issuer.mint(resource, "alice", ["eng"], kid="k-unknown", key=stranger))
            assert r.status_code == 401 and issuer.fetches == before + 1, (r.status_code, issuer.fetches - before)
            r = post(http, issuer.mint(resource, "alice", ["eng"], kid="k-unknown2", key=stranger))
            assert r.status_code == 401 and issuer.fetches == before + 1, (r.status_code, issuer.fetches - before)
    finally:
        issuer.stop()


async def test_a_reload_removes_a_token_and_changes_groups_without_restart(wf: Wf) -> None:
    issuer = KeyIssuer()
    try:
        port = free_port()
        resource = f"http://127.0.0.1:{port}/mcp"
        cfg = wf.write_config(config(issuer.issuer, resource, ["wf_std__const"], []))
        server = wf.start_http("127.0.0.1", port, "--config", str(cfg))
        alice = issuer.mint(resource, "alice", ["eng"])
        async with with_bearer(server.url, CI_TOKEN) as ci, with_bearer(server.url, alice) as a:
            await wait_tools(ci, "wf_std__sleep")
            with anyio.fail_after(OP_TIMEOUT):
                assert not (await ci.call_tool("wf_std__const", {"value": 1})).is_error
            listed = await names(a)
            assert "wf_std__const" in listed and "wf_std__sleep" not in listed, listed

            # The operator takes the ci token out and gives eng `sleep` too.
            cfg.write_text(config(issuer.issuer, resource, ["wf_std__const", "wf_std__sleep"], [], ci=False))
            deadline = time.monotonic() + 15
            with httpx2.Client(timeout=10, trust_env=False) as http:
                while True:
                    r = http.post(
                        server.url,
                        json=INIT,
                        headers={"accept": "application/json, text/event-stream", "authorization": f"Bearer {CI_TOKEN}"},
                    )
                    if r.status_code == 401:
                        break
                    assert time.monotonic() < deadline, "the removed token still works"
                    time.sleep(0.1)
            # The live session's next call is refused too.
            with anyio.fail_after(OP_TIMEOUT), pytest.raises(Exception):
                await ci.call_tool("wf_std__const", {"value": 1})
            listed = await names(a)
            assert {"wf_std__const", "wf_std__sleep"} <= listed, listed
            with anyio.fail_after(OP_TIMEOUT):
                assert not (await a.call_tool("wf_std__sleep", {"ms": 1})).is_error
        assert server.proc.poll() is None, "wf restarted"
    finally:
        issuer.stop()


async def test_opaque_tokens_are_introspected(wf: Wf) -> None:
    port = free_port()
    resource = f"http://127.0.0.1:{port}/mcp"
    secret = "introspection-secret-0123456789"
    idp = IdP(wf.new_log("oidc-provider"), resource, {"alice": ["eng"]}, opaque=f"wf-rs:{secret}")
    try:
        extra = f'\n[server.oauth.introspection]\nclient_id = "wf-rs"\nclient_secret = "${{E2E_INTROSPECTION_SECRET}}"\n'
        cfg = wf.write_config(config(idp.issuer, resource, ["wf_std__const"], [], extra=extra))
        server = wf.start_http("127.0.0.1", port, "--config", str(cfg), env={"E2E_INTROSPECTION_SECRET": secret})
        async with signed_in(server.url, "alice") as (c, storage, _):
            token = storage.tokens.access_token
            assert token.count(".") != 2, "the IdP issued a JWT, not an opaque token"
            await wait_tools(c, "wf_std__const")
            listed = await names(c)
            assert "wf_std__const" in listed and "wf_std__sleep" not in listed, listed
        # A token the IdP does not know is refused after introspection.
        with httpx2.Client(timeout=10, trust_env=False) as http:
            r = http.post(
                server.url,
                json=INIT,
                headers={"accept": "application/json, text/event-stream", "authorization": "Bearer not-a-token-the-idp-issued"},
            )
            assert r.status_code == 401 and 'error="invalid_token"' in r.headers["www-authenticate"], r.text
        server.stop()
        assert secret not in server.log.read_text() and token not in server.log.read_text()
    finally:
        idp.stop()
