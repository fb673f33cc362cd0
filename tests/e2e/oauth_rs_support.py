"""Support for the tests of wf as an OAuth resource server (issue #50):

- `IdP`: the pinned `oidc-provider` (npm) started by tests/e2e/oidc_provider.mjs
  on 127.0.0.1, with users in groups, DCR and RFC 8707 resource indicators on;
- `sign_in`: the official `mcp` client's own OAuth flow (`OAuthClientProvider`)
  against wf, the browser step played by an HTTP client that follows the
  provider's redirects and picks the user with `login_hint`;
- `KeyIssuer`: an issuer whose key the test holds (metadata and a JWKS served
  on 127.0.0.1), to mint the tokens a real provider never issues (expired,
  other audience, `alg: none`...).
"""

from __future__ import annotations

import contextlib
import json
import subprocess
import threading
import time
import urllib.parse
import uuid
from collections.abc import AsyncIterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import httpx2
import jwt
from cryptography.hazmat.primitives.asymmetric import ec
from mcp import Client
from mcp.client.auth import OAuthClientProvider
from mcp.client.streamable_http import streamable_http_client
from mcp.shared._httpx_utils import create_mcp_http_client
from mcp.shared.auth import AuthorizationCodeResult, OAuthClientInformationFull, OAuthClientMetadata, OAuthToken

from conftest import free_port, stop_process

E2E = Path(__file__).resolve().parent
OP_TIMEOUT = 30


class IdP:
    """`oidc-provider` on 127.0.0.1: `users` maps a user to their groups."""

    def __init__(self, log: Path, resource: str, users: dict[str, list[str]], clients: list[str] = (), opaque: str | None = None) -> None:
        # A free port can be taken by another process (a parallel test's
        # outgoing connection) before the provider binds it: try another.
        for _ in range(5):
            if self._start(log, resource, users, clients, opaque):
                return
        raise RuntimeError(f"oidc-provider found no free port in 5 tries: {log.read_text()}")

    def _start(self, log: Path, resource: str, users: dict[str, list[str]], clients: list[str], opaque: str | None) -> bool:
        self.port = free_port()
        self.issuer = f"http://127.0.0.1:{self.port}"
        args = ["node", str(E2E / "oidc_provider.mjs"), "--port", str(self.port), "--resource", resource]
        args += ["--users", json.dumps(users)]
        for c in clients:
            args += ["--client", c]
        if opaque:
            args += ["--opaque", opaque]
        self._log = log.open("wb")
        self.proc = subprocess.Popen(args, cwd=E2E, stdout=subprocess.PIPE, stderr=self._log)
        assert self.proc.stdout is not None
        deadline = time.monotonic() + 30
        line = b""
        while time.monotonic() < deadline and not line.startswith(b"ready"):
            line = self.proc.stdout.readline()
            if not line and self.proc.poll() is not None:
                self._log.close()
                if "EADDRINUSE" in log.read_text(errors="replace"):
                    return False
                raise RuntimeError(f"oidc-provider exited {self.proc.returncode}: {log.read_text()}")
        if not line.startswith(b"ready"):
            raise RuntimeError(f"oidc-provider did not start: {log.read_text()}")
        return True

    def stop(self) -> None:
        stop_process(self.proc)
        self._log.close()


class MemoryStorage:
    def __init__(self) -> None:
        self.tokens: OAuthToken | None = None
        self.client: OAuthClientInformationFull | None = None

    async def get_tokens(self) -> OAuthToken | None:
        return self.tokens

    async def set_tokens(self, tokens: OAuthToken) -> None:
        self.tokens = tokens

    async def get_client_info(self) -> OAuthClientInformationFull | None:
        return self.client

    async def set_client_info(self, client_info: OAuthClientInformationFull) -> None:
        self.client = client_info


REDIRECT = "http://127.0.0.1:1/callback"


def oauth_provider(server_url: str, user: str, storage: MemoryStorage | None = None) -> tuple[OAuthClientProvider, MemoryStorage, list[str]]:
    """The mcp client's OAuth provider for `user`; the list gets each
    authorization URL the client sent the 'browser' to."""
    storage = storage or MemoryStorage()
    visited: list[str] = []
    result: dict[str, str] = {}

    async def redirect_handler(url: str) -> None:
        visited.append(url)
        # The browser: follow the provider's redirects (with its cookies)
        # until it sends us to the client's redirect URI.
        url = url + "&" + urllib.parse.urlencode({"login_hint": user})
        async with httpx2.AsyncClient(follow_redirects=False, timeout=OP_TIMEOUT) as http:
            for _ in range(20):
                r = await http.get(url)
                loc = r.headers.get("location")
                if r.status_code not in (302, 303) or not loc:
                    raise AssertionError(f"authorization stopped at {r.status_code}: {r.text[:500]}")
                url = urllib.parse.urljoin(url, loc)
                if url.startswith(REDIRECT):
                    q = urllib.parse.parse_qs(urllib.parse.urlparse(url).query)
                    if "error" in q:
                        raise AssertionError(f"authorization refused: {q}")
                    result.update(code=q["code"][0], state=q.get("state", [""])[0], iss=q.get("iss", [""])[0])
                    return
        raise AssertionError("too many redirects")

    async def callback_handler() -> AuthorizationCodeResult:
        kw: dict[str, Any] = {"code": result["code"], "state": result["state"] or None}
        if result.get("iss") and "iss" in AuthorizationCodeResult.model_fields:
            kw["iss"] = result["iss"]
        return AuthorizationCodeResult(**kw)

    meta = OAuthClientMetadata(
        client_name=f"e2e {user}",
        redirect_uris=[REDIRECT],
        grant_types=["authorization_code", "refresh_token"],
        response_types=["code"],
        token_endpoint_auth_method="none",
    )
    p = OAuthClientProvider(server_url, meta, storage, redirect_handler=redirect_handler, callback_handler=callback_handler)
    return p, storage, visited


@contextlib.asynccontextmanager
async def signed_in(url: str, user: str, mode: str = "legacy") -> AsyncIterator[tuple[Client, MemoryStorage, list[str]]]:
    provider, storage, visited = oauth_provider(url, user)
    async with create_mcp_http_client(auth=provider) as http:
        async with Client(streamable_http_client(url, http_client=http), mode=mode, cache=None, read_timeout_seconds=OP_TIMEOUT) as c:
            yield c, storage, visited


@contextlib.asynccontextmanager
async def with_bearer(url: str, token: str, mode: str = "legacy") -> AsyncIterator[Client]:
    async with create_mcp_http_client(headers={"Authorization": f"Bearer {token}"}) as http:
        async with Client(streamable_http_client(url, http_client=http), mode=mode, cache=None, read_timeout_seconds=OP_TIMEOUT) as c:
            yield c


class KeyIssuer:
    """An issuer whose signing key the test holds: RFC 8414 metadata and a
    JWKS on 127.0.0.1. `fetches` counts the JWKS fetches."""

    def __init__(self) -> None:
        self.port = free_port()
        self.issuer = f"http://127.0.0.1:{self.port}"
        self.keys: list[tuple[str, Any]] = []
        self.fetches = 0
        self.add_key()
        me = self

        class Handler(BaseHTTPRequestHandler):
            def do_GET(self) -> None:  # noqa: N802
                if self.path == "/.well-known/oauth-authorization-server":
                    body = {"issuer": me.issuer, "jwks_uri": f"{me.issuer}/jwks"}
                elif self.path == "/jwks":
                    me.fetches += 1
                    body = {"keys": [me.jwk(kid, k) for kid, k in me.published]}
                else:
                    self.send_response(404)
                    self.end_headers()
                    return
                data = json.dumps(body).encode()
                self.send_response(200)
                self.send_header("content-type", "application/json")
                self.send_header("content-length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            def log_message(self, *a: Any) -> None:
                pass

        self.published = list(self.keys)
        self.server = ThreadingHTTPServer(("127.0.0.1", self.port), Handler)
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    def add_key(self) -> str:
        kid = f"k-{uuid.uuid4().hex[:8]}"
        self.keys.append((kid, ec.generate_private_key(ec.SECP256R1())))
        return kid

    @staticmethod
    def jwk(kid: str, key: Any) -> dict[str, Any]:
        j = json.loads(jwt.algorithms.ECAlgorithm.to_jwk(key.public_key()))
        return {**j, "kid": kid, "alg": "ES256", "use": "sig"}

    def mint(self, resource: str, sub: str, groups: list[str], kid: str | None = None, key: Any = None, **over: Any) -> str:
        now = int(time.time())
        claims = {
            "iss": self.issuer,
            "aud": resource,
            "sub": sub,
            "email": f"{sub}@example.com",
            "groups": groups,
            "scope": "mcp",
            "iat": now,
            "exp": now + 300,
        }
        claims.update(over)
        claims = {k: v for k, v in claims.items() if v is not None}
        kid = kid or self.keys[0][0]
        key = key or dict(self.keys).get(kid) or self.keys[0][1]
        return jwt.encode(claims, key, algorithm="ES256", headers={"kid": kid})

    def stop(self) -> None:
        self.server.shutdown()
