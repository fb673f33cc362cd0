"""A small real REST API for the OpenAPI source tests: FastAPI (pinned in
requirements.txt) serving its own generated /openapi.json (OpenAPI 3.1).

Run: python openapi_app.py PORT EVENTS_FILE FLAG_FILE
- EVENTS_FILE gets one JSON line per request the slow route sees
  (`{"slow": "started"|"disconnected"|"finished", "id": ...}`) and per
  request at all (`{"request": "GET /path", "authorization": bool}`).
- While FLAG_FILE exists, the document also describes GET /v2/extra.
"""

from __future__ import annotations

import asyncio
import json
import secrets
import sys
from pathlib import Path
from typing import Annotated
from urllib.parse import parse_qs

import uvicorn
from fastapi import Cookie, Depends, FastAPI, File, Form, Header, HTTPException, Query, Request, Response, UploadFile
from fastapi.openapi.utils import get_openapi
from fastapi.responses import JSONResponse
from fastapi.security import (
    APIKeyHeader,
    APIKeyQuery,
    HTTPAuthorizationCredentials,
    HTTPBasic,
    HTTPBasicCredentials,
    HTTPBearer,
)
from pydantic import BaseModel

PORT = int(sys.argv[1])
EVENTS = Path(sys.argv[2])
FLAG = Path(sys.argv[3])
TOKEN = "bearer-secret-7a1f"
API_KEY = "key-secret-93c2"
QUERY_KEY = "query-key-secret-5d0e"
BASIC_USER, BASIC_PASSWORD = "ada", "basic-secret-31f7"
CLIENT_ID, CLIENT_SECRET = "wf-client", "client-secret-8b2c"
ISSUED: set[str] = set()

app = FastAPI(
    title="Inventory",
    version="1.0.0",
    description="A test inventory API.",
    openapi_tags=[
        {"name": "items", "description": "Things kept in stock."},
        {"name": "ops", "description": "Operational routes: errors, slow answers, binary bodies."},
    ],
)


def event(**fields: object) -> None:
    with EVENTS.open("a") as f:
        f.write(json.dumps(fields) + "\n")


class Record:
    """Notes every request (a plain ASGI middleware: Starlette's
    BaseHTTPMiddleware would hide a client's disconnect from the slow route)."""

    def __init__(self, inner: object) -> None:
        self.inner = inner

    async def __call__(self, scope, receive, send):  # type: ignore[no-untyped-def]
        if scope["type"] == "http":
            headers = {k.decode().lower() for k, _ in scope["headers"]}
            event(request=f"{scope['method']} {scope['path']}", query=scope["query_string"].decode(),
                  authorization="authorization" in headers)
        await self.inner(scope, receive, send)  # type: ignore[operator]


app.add_middleware(Record)


bearer = HTTPBearer(auto_error=False)
api_key = APIKeyHeader(name="X-API-Key", auto_error=False)


def need_bearer(creds: Annotated[HTTPAuthorizationCredentials | None, Depends(bearer)]) -> None:
    if creds is None or creds.credentials != TOKEN:
        raise HTTPException(status_code=401, detail="a valid bearer token is required")


def need_key(key: Annotated[str | None, Depends(api_key)]) -> None:
    if key != API_KEY:
        raise HTTPException(status_code=403, detail="a valid X-API-Key is required")


query_key = APIKeyQuery(name="api_key", auto_error=False)
basic = HTTPBasic(auto_error=False)


def need_query_key(key: Annotated[str | None, Depends(query_key)]) -> None:
    if key != QUERY_KEY:
        raise HTTPException(status_code=403, detail="a valid api_key query parameter is required")


def need_basic(creds: Annotated[HTTPBasicCredentials | None, Depends(basic)]) -> str:
    if creds is None or (creds.username, creds.password) != (BASIC_USER, BASIC_PASSWORD):
        raise HTTPException(status_code=401, detail="valid basic credentials are required",
                            headers={"WWW-Authenticate": "Basic"})
    return creds.username


def need_issued(creds: Annotated[HTTPAuthorizationCredentials | None, Depends(bearer)]) -> None:
    if creds is None or creds.credentials not in ISSUED:
        raise HTTPException(status_code=401, detail="a token from /oauth/token is required")


class Dimensions(BaseModel):
    width: float
    height: float


class NewItem(BaseModel):
    name: str
    price: float
    tags: list[str] = []
    dimensions: Dimensions | None = None


class Item(BaseModel):
    id: int
    name: str
    price: float
    tags: list[str]
    dimensions: Dimensions | None = None


class Lookup(BaseModel):
    item_id: int
    q: str | None
    tags: list[str]
    limit: int
    trace: str | None
    session: str | None


@app.get("/items/{item_id}", tags=["items"], summary="Look an item up", response_model=Lookup)
def lookup(
    item_id: int,
    q: str | None = None,
    tags: Annotated[list[str], Query()] = [],  # noqa: B006 - FastAPI reads the default
    limit: int = 10,
    x_trace: Annotated[str | None, Header()] = None,
    session: Annotated[str | None, Cookie()] = None,
) -> Lookup:
    return Lookup(item_id=item_id, q=q, tags=tags, limit=limit, trace=x_trace, session=session)


@app.post("/items", tags=["items"], summary="Add an item", status_code=201, response_model=Item,
          dependencies=[Depends(need_bearer)])
def add(item: NewItem) -> Item:
    return Item(id=42, name=item.name, price=item.price, tags=item.tags, dimensions=item.dimensions)


@app.get("/stock", tags=["items"], summary="Stock levels (API key)", dependencies=[Depends(need_key)])
def stock() -> dict[str, int]:
    return {"widgets": 3, "gadgets": 5}


@app.get("/errors/{code}", tags=["ops"], summary="Answers with the status asked for")
def error(code: int) -> dict[str, str]:
    raise HTTPException(status_code=code, detail=f"failure {code} as requested")


@app.get("/slow", tags=["ops"], summary="Answers after `seconds`")
async def slow(request: Request, id: str, seconds: float = 30) -> dict[str, str]:
    event(slow="started", id=id)
    waited = 0.0
    while waited < seconds:
        if await request.is_disconnected():
            event(slow="disconnected", id=id)
            return {"done": "no"}
        await asyncio.sleep(0.05)
        waited += 0.05
    event(slow="finished", id=id)
    return {"done": "yes"}


@app.get("/logo", tags=["ops"], summary="A PNG image",
         responses={200: {"content": {"image/png": {}}}}, response_class=Response)
def logo() -> Response:
    return Response(content=b"\x89PNG\r\n\x1a\n" + bytes(range(32)), media_type="image/png")


@app.post("/oauth/token", include_in_schema=False)
async def token(request: Request) -> JSONResponse:
    """OAuth 2 client credentials (RFC 6749 §4.4): the client authenticates
    with HTTP basic; a wrong secret is echoed back (wf must redact it)."""
    form = parse_qs((await request.body()).decode())
    creds = await basic(request)
    if form.get("grant_type") != ["client_credentials"]:
        return JSONResponse({"error": "unsupported_grant_type"}, status_code=400)
    if creds is None or (creds.username, creds.password) != (CLIENT_ID, CLIENT_SECRET):
        got = creds.password if creds else None
        return JSONResponse({"error": "invalid_client", "error_description": f"bad secret {got}"}, status_code=401)
    issued = f"issued-{secrets.token_hex(8)}"
    ISSUED.add(issued)
    event(token="issued", scope=form.get("scope", [""])[0])
    return JSONResponse({"access_token": issued, "token_type": "Bearer", "expires_in": 3600})


@app.get("/reports", tags=["ops"], summary="Reports (OAuth 2 client credentials)",
         dependencies=[Depends(need_issued)])
def reports() -> list[dict[str, int]]:
    return [{"month": 1, "sold": 10}, {"month": 2, "sold": 12}]


@app.get("/me", tags=["ops"], summary="Who am I (basic)")
def me(user: Annotated[str, Depends(need_basic)]) -> dict[str, str]:
    return {"user": user}


@app.get("/quota", tags=["ops"], summary="Quota (API key in the query)", dependencies=[Depends(need_query_key)])
def quota() -> dict[str, int]:
    return {"left": 99}


@app.post("/notes", tags=["items"], summary="A form post")
def note(title: Annotated[str, Form()], count: Annotated[int, Form()] = 1) -> dict[str, object]:
    return {"title": title, "count": count}


@app.post("/upload", tags=["items"], summary="A multipart upload")
async def upload(file: Annotated[UploadFile, File()], label: Annotated[str, Form()]) -> dict[str, object]:
    data = await file.read()
    return {"label": label, "size": len(data), "head": data[:8].hex(), "filename": file.filename}


@app.get("/feed.xml", tags=["ops"], summary="An XML feed",
         responses={200: {"content": {"application/xml": {}}}}, response_class=Response)
def feed() -> Response:
    return Response(content="<feed><entry>one</entry></feed>", media_type="application/xml")


@app.get("/v2/extra", tags=["items"], summary="Only in the second version of the document")
def extra() -> dict[str, str]:
    return {"v": "2"}


def openapi() -> dict[str, object]:
    # Regenerated per request, so the document changes when FLAG appears.
    routes = [r for r in app.routes if FLAG.exists() or getattr(r, "path", "") != "/v2/extra"]
    return get_openapi(title=app.title, version=app.version, description=app.description,
                       routes=routes, tags=app.openapi_tags)


app.openapi = openapi  # type: ignore[method-assign]


@app.get("/private/openapi.json", include_in_schema=False)
def private_document(creds: Annotated[HTTPAuthorizationCredentials | None, Depends(bearer)]) -> JSONResponse:
    """The same document behind the bearer token (`spec_auth`)."""
    if creds is None or creds.credentials != TOKEN:
        raise HTTPException(status_code=401, detail="the document needs the bearer token")
    return JSONResponse(openapi())

if __name__ == "__main__":
    uvicorn.run(app, host="127.0.0.1", port=PORT, log_level="warning")
