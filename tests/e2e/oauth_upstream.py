"""An upstream MCP server behind OAuth 2.1 for the upstream-OAuth session tests
(test_upstream_oauth_session.py), whose tokens a test can expire and revoke on
demand, which the conformance suite's mock servers cannot. One process, one
port: the authorization server (RFC 8414 metadata, RFC 7591 registration, an
authorization endpoint that approves at once, a token endpoint with PKCE S256,
refresh with rotation) and the protected resource (RFC 9728 metadata, `/mcp`
served by the official `mcp` package's server side).

- access tokens live `--expires-in` seconds (strictly: an expired one gets 401);
- `POST /control/revoke` revokes every access and refresh token issued so far;
- the tool `admin_only` needs scope `admin`: without it `/mcp` answers 403
  `insufficient_scope` (a step-up challenge);
- `--client-id ID --client-secret SECRET` pre-registers a confidential client:
  its code exchanges and refreshes must authenticate (HTTP Basic or the form's
  `client_secret`), or they get 401 `invalid_client`;
- `--record FILE` gets one JSON line per event: each `/mcp` request with the
  serial number of its token (never the token) and the status answered, each
  authorization with the scope asked for, each token grant and its outcome.

Tokens start with `oauthmock-`, so a test can grep for them.
"""

from __future__ import annotations

import argparse
import base64
import hashlib
import json
import secrets
import time
import urllib.parse
from pathlib import Path
from typing import Any

import uvicorn
from mcp.server.mcpserver import MCPServer
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse, RedirectResponse, Response
from starlette.routing import Route

TOKEN_PREFIX = "oauthmock-"
BASE_SCOPE = "mcp"


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--port", type=int, required=True)
    ap.add_argument("--record", required=True)
    ap.add_argument("--expires-in", type=int, default=3600)
    ap.add_argument("--client-id")
    ap.add_argument("--client-secret")
    args = ap.parse_args()
    base = f"http://127.0.0.1:{args.port}"
    record_path = Path(args.record)

    def record(**event: Any) -> None:
        with record_path.open("a") as f:
            f.write(json.dumps(event) + "\n")

    access: dict[str, dict[str, Any]] = {}  # token -> serial, scope, expires, revoked
    refresh: dict[str, dict[str, Any]] = {}  # token -> scope, client_id, used
    codes: dict[str, dict[str, Any]] = {}
    serial = [0]

    def issue(scope: str, client_id: str) -> dict[str, Any]:
        serial[0] += 1
        at = f"{TOKEN_PREFIX}at-{serial[0]}-{secrets.token_hex(12)}"
        rt = f"{TOKEN_PREFIX}rt-{serial[0]}-{secrets.token_hex(12)}"
        access[at] = {"serial": serial[0], "scope": scope.split(), "expires": time.time() + args.expires_in}
        refresh[rt] = {"scope": scope, "client_id": client_id, "used": False}
        return {"access_token": at, "token_type": "Bearer", "expires_in": args.expires_in,
                "refresh_token": rt, "scope": scope}

    prm_url = f"{base}/.well-known/oauth-protected-resource/mcp"

    async def prm(_: Request) -> Response:
        return JSONResponse({"resource": f"{base}/mcp", "authorization_servers": [base],
                             "scopes_supported": [BASE_SCOPE]})

    async def asm(_: Request) -> Response:
        return JSONResponse({
            "issuer": base,
            "authorization_endpoint": f"{base}/authorize",
            "token_endpoint": f"{base}/token",
            "registration_endpoint": f"{base}/register",
            "response_types_supported": ["code"],
            "grant_types_supported": ["authorization_code", "refresh_token"],
            "code_challenge_methods_supported": ["S256"],
            "token_endpoint_auth_methods_supported":
                ["client_secret_basic", "client_secret_post", "none"] if args.client_secret else ["none"],
            "scopes_supported": [BASE_SCOPE, "admin"],
        })

    async def register(request: Request) -> Response:
        body = await request.json()
        client_id = f"client-{secrets.token_hex(4)}"
        record(event="register")
        return JSONResponse({**body, "client_id": client_id, "token_endpoint_auth_method": "none"}, status_code=201)

    async def authorize(request: Request) -> Response:
        q = request.query_params
        code = secrets.token_hex(16)
        codes[code] = {"challenge": q.get("code_challenge"), "scope": q.get("scope") or BASE_SCOPE,
                       "client_id": q.get("client_id"), "redirect_uri": q.get("redirect_uri")}
        record(event="authorize", scope=q.get("scope"))
        sep = "&" if "?" in q["redirect_uri"] else "?"
        query = urllib.parse.urlencode({"code": code, "state": q.get("state", "")})
        return RedirectResponse(f"{q['redirect_uri']}{sep}{query}", status_code=302)

    def client_of(request: Request, form: Any) -> tuple[str | None, str | None]:
        """The client id and secret a token request authenticates with."""
        auth = request.headers.get("authorization", "")
        if auth.lower().startswith("basic "):
            user, _, password = base64.b64decode(auth[6:]).decode().partition(":")
            return urllib.parse.unquote_plus(user), urllib.parse.unquote_plus(password)
        return form.get("client_id"), form.get("client_secret")

    async def token(request: Request) -> Response:
        form = await request.form()
        grant = form.get("grant_type")
        client_id, secret = client_of(request, form)
        if args.client_id and client_id == args.client_id and secret != args.client_secret:
            record(event="token", grant=grant, ok=False, client_auth=False)
            return JSONResponse({"error": "invalid_client"}, status_code=401)
        if grant == "authorization_code":
            c = codes.pop(str(form.get("code")), None)
            verifier = str(form.get("code_verifier", ""))
            digest = base64.urlsafe_b64encode(hashlib.sha256(verifier.encode()).digest()).rstrip(b"=").decode()
            ok = c is not None and c["challenge"] == digest
            record(event="token", grant=grant, ok=ok)
            if not ok:
                return JSONResponse({"error": "invalid_grant"}, status_code=400)
            return JSONResponse(issue(c["scope"], c["client_id"]))
        if grant == "refresh_token":
            r = refresh.get(str(form.get("refresh_token")))
            ok = r is not None and not r["used"]
            record(event="token", grant=grant, ok=ok)
            if not ok:
                # Quotes the token, as careless servers do: wf must not log it.
                quoted = form.get("refresh_token")
                return JSONResponse({"error": "invalid_grant", "error_description": f"refresh token {quoted} is revoked"},
                                    status_code=400)
            r["used"] = True  # rotation: each refresh token works once
            return JSONResponse(issue(r["scope"], r["client_id"]))
        return JSONResponse({"error": "unsupported_grant_type"}, status_code=400)

    async def revoke_all(_: Request) -> Response:
        for a in access.values():
            a["expires"] = 0
        for r in refresh.values():
            r["used"] = True
        record(event="revoke_all")
        return JSONResponse({"revoked": True})

    server = MCPServer("oauth-upstream")

    @server.tool(description="Answers ok")
    def whoami() -> str:
        return "ok"

    @server.tool(description="Answers ok to a token with scope admin")
    def admin_only() -> str:
        return "admin ok"

    mcp_app = server.streamable_http_app()
    routes = Starlette(routes=[
        Route("/.well-known/oauth-protected-resource/mcp", prm),
        Route("/.well-known/oauth-protected-resource", prm),
        Route("/.well-known/oauth-authorization-server", asm),
        Route("/register", register, methods=["POST"]),
        Route("/authorize", authorize),
        Route("/token", token, methods=["POST"]),
        Route("/control/revoke", revoke_all, methods=["POST"]),
    ])

    async def deny(send: Any, status: int, challenge: str) -> None:
        await send({"type": "http.response.start", "status": status,
                    "headers": [(b"www-authenticate", challenge.encode()), (b"content-length", b"0")]})
        await send({"type": "http.response.body", "body": b""})

    async def app(scope: Any, receive: Any, send: Any) -> None:
        if scope["type"] != "http" or not scope["path"].startswith("/mcp"):
            target = mcp_app if scope["type"] == "lifespan" else routes
            await target(scope, receive, send)
            return
        headers = {k.decode("latin-1").lower(): v.decode("latin-1") for k, v in scope["headers"]}
        bearer = headers.get("authorization", "").removeprefix("Bearer ").strip()
        grant = access.get(bearer)
        # The body, read whole and replayed, to see which tool a call names.
        chunks: list[Any] = []
        body = b""
        while True:
            message = await receive()
            chunks.append(message)
            body += message.get("body", b"")
            if message["type"] != "http.request" or not message.get("more_body"):
                break
        try:
            rpc = json.loads(body) if body else {}
        except json.JSONDecodeError:
            rpc = {}
        method = rpc.get("method") if isinstance(rpc, dict) else None
        tool = (rpc.get("params") or {}).get("name") if method == "tools/call" else None
        event = {"event": "mcp", "http": scope["method"], "rpc": method, "tool": tool,
                 "serial": grant["serial"] if grant else None}
        if grant is None or grant["expires"] <= time.time():
            record(**event, status=401)
            await deny(send, 401, f'Bearer error="invalid_token", resource_metadata="{prm_url}", scope="{BASE_SCOPE}"')
            return
        if tool == "admin_only" and "admin" not in grant["scope"]:
            record(**event, status=403)
            await deny(send, 403, f'Bearer error="insufficient_scope", scope="{BASE_SCOPE} admin", '
                                  f'resource_metadata="{prm_url}"')
            return
        record(**event, status=200)

        async def replay() -> Any:
            return chunks.pop(0) if chunks else await receive()

        await mcp_app(scope, replay, send)

    uvicorn.run(app, host="127.0.0.1", port=args.port, log_level="warning", lifespan="on")


if __name__ == "__main__":
    main()
