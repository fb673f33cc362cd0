"""OpenAPI sources (issue #33) end to end: a real FastAPI app (openapi_app.py,
pinned in requirements.txt) serving its own generated openapi.json, reached
through `wf serve` with the official `mcp` client; the vendored public
documents (tests/openapi/specs) listed whole; a workflow chaining an OpenAPI
node, a wf.std node and an MCP fixture tool with `wf run`; the bad inputs."""

from __future__ import annotations

import base64
import json
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from functools import partial
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import anyio
import pytest

from admin_support import admin, sources_by_name, wait_for
from conftest import REPO, Wf, all_prompts, all_resources, all_tools, content_text, free_port, tail, toml_config
from list_changed_support import list_changed_waiter

pytestmark = pytest.mark.anyio

APP = Path(__file__).parent / "openapi_app.py"
SPECS = REPO / "tests" / "openapi" / "specs"
TOKEN = "bearer-secret-7a1f"
API_KEY = "key-secret-93c2"
QUERY_KEY = "query-key-secret-5d0e"
BASIC_PASSWORD = "basic-secret-31f7"
CLIENT_SECRET = "client-secret-8b2c"
OP_TIMEOUT = 60


class App:
    def __init__(self, root: Path) -> None:
        self.port = free_port()
        self.events = root / "app-events.jsonl"
        self.flag = root / "app-v2.flag"
        self.log = root / "app.log"
        self.base = f"http://127.0.0.1:{self.port}"
        with self.log.open("wb") as out:
            self.proc = subprocess.Popen(
                [sys.executable, str(APP), str(self.port), str(self.events), str(self.flag)],
                stdin=subprocess.DEVNULL, stdout=out, stderr=subprocess.STDOUT,
            )
        deadline = time.monotonic() + 30
        while True:
            with socket.socket() as s:
                if s.connect_ex(("127.0.0.1", self.port)) == 0:
                    break
            if self.proc.poll() is not None or time.monotonic() > deadline:
                pytest.fail(f"the FastAPI app did not start:\n{tail(self.log)}")
            time.sleep(0.05)

    def seen(self) -> list[dict[str, Any]]:
        if not self.events.exists():
            return []
        return [json.loads(line) for line in self.events.read_text().splitlines() if line.strip()]

    def stop(self) -> None:
        self.proc.terminate()
        try:
            self.proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            self.proc.kill()


@pytest.fixture
def app(wf: Wf) -> Iterator[App]:
    a = App(wf.root)
    yield a
    a.stop()


def api_config(wf: Wf, app: App, auth: dict[str, Any] | None = None, **extra: Any) -> Path:
    source: dict[str, Any] = {"kind": "openapi", "spec": f"{app.base}/openapi.json", **extra}
    if auth is not None:
        source["auth"] = auth
    return wf.write_config(toml_config({"api": source}))


async def call(c: Any, name: str, args: dict[str, Any] | None = None) -> Any:
    with anyio.fail_after(OP_TIMEOUT):
        return await c.call_tool(name, args or {})


# --------------------------------------------------------------------------- tools and calls


async def test_operations_are_tools_and_calls_reach_the_app(wf: Wf, app: App) -> None:
    # strict_responses: the document's response schemas are listed (and every
    # answer must match them); test_openapi_real.py covers the default.
    config = api_config(wf, app, {"type": "bearer", "token": "${API_TOKEN}"}, strict_responses=True)
    async with wf.stdio_client("auto", "--config", str(config), env={"API_TOKEN": TOKEN}) as c:
        tools = {t.name: t for t in await all_tools(c) if t.name.startswith("api__")}
        assert set(tools) == {
            "api__lookup_items__item_id__get", "api__add_items_post", "api__stock_stock_get",
            "api__error_errors__code__get", "api__slow_slow_get", "api__logo_logo_get",
            "api__reports_reports_get", "api__me_me_get", "api__quota_quota_get", "api__note_notes_post",
            "api__upload_upload_post", "api__feed_feed_xml_get",
        }, sorted(tools)
        lookup = tools["api__lookup_items__item_id__get"]
        assert lookup.input_schema["required"] == ["item_id"], lookup.input_schema
        assert set(lookup.input_schema["properties"]) == {"item_id", "q", "tags", "limit", "x-trace", "session"}
        assert lookup.output_schema is not None and "item_id" in lookup.output_schema["properties"]
        assert lookup.description.startswith("Look an item up") and "GET /items/{item_id}" in lookup.description

        # Every parameter style the app uses: path, query (scalar, exploded array), header, cookie.
        r = await call(c, lookup.name, {"item_id": 7, "q": "blue car", "tags": ["a", "b c"], "limit": 3,
                                        "x-trace": "t-1", "session": "s-1"})
        assert not r.is_error, content_text(r.content)
        assert r.structured_content == {"item_id": 7, "q": "blue car", "tags": ["a", "b c"], "limit": 3,
                                        "trace": "t-1", "session": "s-1"}
        assert app.seen()[-1]["query"] == "q=blue%20car&tags=a&tags=b%20c&limit=3"
        # A null optional parameter is left out.
        r = await call(c, lookup.name, {"item_id": 1, "q": None})
        assert r.structured_content["q"] is None and r.structured_content["limit"] == 10

        # Progress reaches a client that asked for it: sending, then reading the answer.
        seen: list[tuple[float, float | None, str | None]] = []

        async def on_progress(progress: float, total: float | None, message: str | None) -> None:
            seen.append((progress, total, message))

        with anyio.fail_after(OP_TIMEOUT):
            r = await c.call_tool(lookup.name, {"item_id": 3}, progress_callback=on_progress)
        assert not r.is_error
        assert seen == [(0, 2, "sending GET /items/{item_id}"), (1, 2, "reading the response")], seen

        # A JSON body with a nested object, sent with the bearer token.
        r = await call(c, "api__add_items_post", {"body": {"name": "lamp", "price": 9.5, "dimensions": {"width": 1, "height": 2}}})
        assert not r.is_error, content_text(r.content)
        assert r.structured_content == {"id": 42, "name": "lamp", "price": 9.5, "tags": [],
                                        "dimensions": {"width": 1.0, "height": 2.0}}

        # Bad arguments: a tool error naming the argument; nothing reaches the app.
        before = len(app.seen())
        r = await call(c, lookup.name, {"item_id": "seven"})
        assert r.is_error and "$.item_id" in content_text(r.content), content_text(r.content)
        assert len(app.seen()) == before

        # Error statuses are tool errors with the status and the body.
        for code in (404, 422, 500):
            r = await call(c, "api__error_errors__code__get", {"code": code})
            text = content_text(r.content)
            assert r.is_error and f"HTTP {code}" in text and f"failure {code} as requested" in text, text

        # A binary body is an embedded resource.
        r = await call(c, "api__logo_logo_get")
        assert not r.is_error
        blob = r.content[0].resource
        assert blob.mime_type == "image/png" and base64.b64decode(blob.blob).startswith(b"\x89PNG")

        # The document is a resource; the prompt explains the tags.
        resources = [r for r in await all_resources(c) if str(r.uri) == "openapi://api/document"]
        assert len(resources) == 1
        doc = await c.read_resource("openapi://api/document")
        assert json.loads(doc.contents[0].text)["info"]["title"] == "Inventory"
        assert "api__api_overview" in {p.name for p in await all_prompts(c)}
        prompt = await c.get_prompt("api__api_overview", {})
        text = prompt.messages[0].content.text
        assert "## items" in text and "Things kept in stock." in text and "`slow_slow_get`" in text, text


async def test_auth_is_refused_without_the_secret_and_accepted_with_it(wf: Wf, app: App) -> None:
    body = {"body": {"name": "x", "price": 1}}
    # No credentials: the app refuses; the status and its detail reach the caller.
    config = api_config(wf, app)
    async with wf.stdio_client("auto", "--config", str(config)) as c:
        r = await call(c, "api__add_items_post", body)
        assert r.is_error and "HTTP 401" in content_text(r.content), content_text(r.content)
        r = await call(c, "api__stock_stock_get")
        assert r.is_error and "HTTP 403" in content_text(r.content), content_text(r.content)
    # The API key in its header: accepted.
    config = api_config(wf, app, {"type": "api_key", "in": "header", "name": "X-API-Key", "value": "${KEY}"})
    async with wf.stdio_client("auto", "--config", str(config), env={"KEY": API_KEY}) as c:
        r = await call(c, "api__stock_stock_get")
        assert not r.is_error and r.structured_content == {"widgets": 3, "gadgets": 5}
        # A wrong bearer token is refused, and the error does not echo a secret.
    config = api_config(wf, app, {"type": "bearer", "token": "${API_TOKEN}"})
    async with wf.stdio_client("auto", "--config", str(config), env={"API_TOKEN": "wrong-token-123"}) as c:
        r = await call(c, "api__add_items_post", body)
        assert r.is_error and "HTTP 401" in content_text(r.content)
        assert "wrong-token-123" not in content_text(r.content)


async def test_cancelling_a_call_aborts_the_request(wf: Wf, app: App) -> None:
    config = api_config(wf, app)
    async with wf.stdio_client("auto", "--config", str(config)) as c:

        async def probe() -> list[dict[str, Any]]:
            return [e for e in app.seen() if e.get("id") == "c1"]

        with anyio.fail_after(OP_TIMEOUT):
            async with anyio.create_task_group() as tg:
                tg.start_soon(partial(c.call_tool, "api__slow_slow_get", {"id": "c1", "seconds": 30}))
                await wait_for(probe, lambda ev: any(e.get("slow") == "started" for e in ev), "slow started", OP_TIMEOUT)
                tg.cancel_scope.cancel()
        # The app sees its client go away long before the 30 s are up.
        events = await wait_for(probe, lambda ev: any(e.get("slow") == "disconnected" for e in ev),
                                "the app saw the request aborted", 20)
        assert not any(e.get("slow") == "finished" for e in events), events
        # The source keeps serving.
        r = await call(c, "api__lookup_items__item_id__get", {"item_id": 2})
        assert not r.is_error


async def test_a_changed_document_is_picked_up_on_refresh_and_announced(wf: Wf, app: App) -> None:
    config = api_config(wf, app)
    notes: list[Any] = []

    async def handler(message: Any) -> None:
        notes.append(message)

    async with wf.stdio_client("legacy", "--config", str(config), message_handler=handler) as c:
        assert c.protocol_version == "2025-11-25"
        names = {t.name for t in await all_tools(c)}
        assert "api__extra_v2_extra_get" not in names
        async with list_changed_waiter(c, notes) as announced:
            app.flag.write_text("v2")
            await admin(c, "refresh_catalog", {"source": "api"})
            await announced(OP_TIMEOUT)
        names = {t.name for t in await all_tools(c)}
        assert "api__extra_v2_extra_get" in names
        r = await call(c, "api__extra_v2_extra_get")
        assert r.structured_content == {"v": "2"}


def wf_logs(wf: Wf) -> str:
    return "\n".join(p.read_text(errors="replace") for p in wf.logs if p.exists())


async def test_oauth_basic_and_query_key_are_refused_without_the_secret_and_accepted_with_it(wf: Wf, app: App) -> None:
    # No credentials: each protected route refuses, with its status.
    config = api_config(wf, app)
    async with wf.stdio_client("auto", "--config", str(config)) as c:
        for tool, status in (("api__reports_reports_get", 401), ("api__me_me_get", 401), ("api__quota_quota_get", 403)):
            r = await call(c, tool)
            assert r.is_error and f"HTTP {status}" in content_text(r.content), (tool, content_text(r.content))

    # OAuth 2 client credentials: a token from the app's token endpoint, fetched once.
    oauth = {"type": "oauth2_client_credentials", "token_url": f"{app.base}/oauth/token", "client_id": "wf-client",
             "client_secret": "${CLIENT_SECRET}", "scopes": ["reports:read"]}
    config = api_config(wf, app, oauth, strict_responses=True)
    async with wf.stdio_client("auto", "--config", str(config), env={"CLIENT_SECRET": CLIENT_SECRET}) as c:
        tools = {t.name: t for t in await all_tools(c)}
        reports = tools["api__reports_reports_get"]
        # An array answer: its schema wrapped, the answer under "result".
        assert reports.output_schema["properties"]["result"]["type"] == "array", reports.output_schema
        assert '{"result": <answer>}' in reports.description
        for _ in range(2):
            r = await call(c, reports.name)
            assert not r.is_error, content_text(r.content)
            assert r.structured_content == {"result": [{"month": 1, "sold": 10}, {"month": 2, "sold": 12}]}
        issued = [e for e in app.seen() if e.get("token") == "issued"]
        assert issued == [{"token": "issued", "scope": "reports:read"}], issued
        # An operation without a security requirement gets no credentials.
        r = await call(c, "api__lookup_items__item_id__get", {"item_id": 4})
        assert not r.is_error
        assert app.seen()[-1] == {"request": "GET /items/4", "query": "", "authorization": False}, app.seen()[-1]
    # A wrong client secret: the token endpoint's refusal, which quotes it, is redacted.
    wrong = "wrong-client-secret-77"
    async with wf.stdio_client("auto", "--config", str(config), env={"CLIENT_SECRET": wrong}) as c:
        r = await call(c, "api__reports_reports_get")
        text = content_text(r.content)
        assert r.is_error and "401" in text and "[REDACTED]" in text and wrong not in text, text

    # Basic.
    basic = {"type": "basic", "username": "ada", "password": "${BASIC_PASSWORD}"}
    config = api_config(wf, app, basic)
    async with wf.stdio_client("auto", "--config", str(config), env={"BASIC_PASSWORD": BASIC_PASSWORD}) as c:
        r = await call(c, "api__me_me_get")
        assert not r.is_error and r.structured_content == {"user": "ada"}, content_text(r.content)
    async with wf.stdio_client("auto", "--config", str(config), env={"BASIC_PASSWORD": "wrong-basic-pw-1"}) as c:
        r = await call(c, "api__me_me_get")
        assert r.is_error and "HTTP 401" in content_text(r.content)
        assert "wrong-basic-pw-1" not in content_text(r.content)

    # An API key in the query string.
    key = {"type": "api_key", "in": "query", "name": "api_key", "value": "${QUERY_KEY}"}
    config = api_config(wf, app, key)
    async with wf.stdio_client("auto", "--config", str(config), env={"QUERY_KEY": QUERY_KEY}) as c:
        r = await call(c, "api__quota_quota_get")
        assert not r.is_error and r.structured_content == {"left": 99}, content_text(r.content)
        assert app.seen()[-1]["query"] == f"api_key={QUERY_KEY}"
    async with wf.stdio_client("auto", "--config", str(config), env={"QUERY_KEY": "wrong-query-key-2"}) as c:
        r = await call(c, "api__quota_quota_get")
        assert r.is_error and "HTTP 403" in content_text(r.content)

    # No secret reached wf's logs.
    logs = wf_logs(wf)
    for secret in (CLIENT_SECRET, wrong, BASIC_PASSWORD, QUERY_KEY):
        assert secret not in logs, secret


async def test_form_and_multipart_bodies_and_xml_answers(wf: Wf, app: App) -> None:
    config = api_config(wf, app)
    async with wf.stdio_client("auto", "--config", str(config)) as c:
        tools = {t.name: t for t in await all_tools(c)}
        r = await call(c, "api__note_notes_post", {"body": {"title": "a b&c", "count": 2}})
        assert not r.is_error and r.structured_content == {"title": "a b&c", "count": 2}, content_text(r.content)
        upload = tools["api__upload_upload_post"]
        body = upload.input_schema["properties"]["body"]
        assert body["properties"]["file"]["contentEncoding"] == "base64", body
        data = b"\x89PNG\r\n\x1a\n" + bytes(range(40))
        r = await call(c, upload.name, {"body": {"file": base64.b64encode(data).decode(), "label": "logo"}})
        assert not r.is_error, content_text(r.content)
        assert r.structured_content == {"label": "logo", "size": len(data), "head": data[:8].hex(), "filename": "file"}
        r = await call(c, "api__feed_feed_xml_get")
        assert not r.is_error and r.structured_content is None
        assert content_text(r.content) == "<feed><entry>one</entry></feed>"


async def test_a_document_behind_auth_and_its_periodic_refetch(wf: Wf, app: App) -> None:
    bearer = {"type": "bearer", "token": "${API_TOKEN}"}
    spec = f"{app.base}/private/openapi.json"
    config = wf.write_config(toml_config({
        "locked": {"kind": "openapi", "spec": spec, "auth": bearer},
        "api": {"kind": "openapi", "spec": spec, "auth": bearer, "spec_auth": True, "refresh_interval_ms": 1000},
    }))
    notes: list[Any] = []

    async def handler(message: Any) -> None:
        notes.append(message)

    async with wf.stdio_client("legacy", "--config", str(config), env={"API_TOKEN": TOKEN}, message_handler=handler) as c:
        with anyio.fail_after(OP_TIMEOUT):
            rows = await sources_by_name(c)
            while any(rows[n]["state"] == "pending" for n in ("locked", "api")):
                await anyio.sleep(0.1)
                rows = await sources_by_name(c)
        # Without spec_auth the document's request carries no token.
        assert rows["locked"]["state"] == "failed" and "HTTP status 401" in rows["locked"]["error"], rows["locked"]
        assert rows["api"]["state"] == "ready", rows["api"]
        names = {t.name for t in await all_tools(c)}
        assert "api__lookup_items__item_id__get" in names and "api__extra_v2_extra_get" not in names
        # The document changes; the refetch announces it, no refresh asked.
        async with list_changed_waiter(c, notes) as announced:
            app.flag.write_text("v2")
            await announced(OP_TIMEOUT)
        names = {t.name for t in await all_tools(c)}
        assert "api__extra_v2_extra_get" in names
        r = await call(c, "api__extra_v2_extra_get")
        assert r.structured_content == {"v": "2"}


# --------------------------------------------------------------------------- workflows


async def test_a_workflow_chains_openapi_std_and_mcp_nodes(wf: Wf, app: App, fixture_upstream_bin: Path) -> None:
    config = wf.write_config(toml_config({
        "api": {"kind": "openapi", "spec": f"{app.base}/openapi.json"},
        "fx": {"command": str(fixture_upstream_bin)},
    }))
    doc = {
        "name": "rest-chain",
        "inputs": {"type": "object", "properties": {"id": {"type": "integer"}}, "required": ["id"]},
        "nodes": [
            {"id": "get", "use": "api.lookup_items__item_id__get", "args": {"item_id": {"$ref": "inputs.id"}, "q": "lamp"}},
            {"id": "say", "use": "wf.std.template",
             "args": {"template": "item {{id}} is {{q}}", "values": {"id": {"$ref": "nodes.get.output.item_id"}, "q": {"$ref": "nodes.get.output.q"}}}},
            {"id": "echo", "use": "fx.echo", "args": {"message": {"$ref": "nodes.say.output.text"}}},
        ],
        "outputs": {"looked_up": {"$ref": "nodes.get.output.item_id"}, "echoed": {"$ref": "nodes.echo.output"}},
    }
    # The planner validates it against the live catalog: the OpenAPI node's
    # schema is known, so a wrong argument is found before anything runs.
    async with wf.stdio_client("auto", "--config", str(config)) as c:
        with anyio.fail_after(OP_TIMEOUT):
            fine = await c.call_tool("wf_planner__validate_workflow", {"workflow": doc})
            assert fine.structured_content["valid"] is True, fine.structured_content
            broken = json.loads(json.dumps(doc))
            broken["nodes"][0]["args"] = {"itemid": 5}
            got = (await c.call_tool("wf_planner__validate_workflow", {"workflow": broken})).structured_content
        found = {(p.get("node"), p["path"], p["kind"]) for p in got["problems"]}
        assert ("get", "nodes[0].args.item_id", "missing_argument") in found, got["problems"]
        assert ("get", "nodes[0].args.itemid", "unknown_argument") in found, got["problems"]
    path = wf.root / "chain.json"
    path.write_text(json.dumps(doc))
    proc = wf.run("run", str(path), "--input", "id=5", "--config", str(config), *wf.plugin_args(), "--log-level", "error",
                  timeout=120)
    assert proc.returncode == 0, proc.stderr
    out = json.loads(proc.stdout)
    assert out["status"] == "succeeded", out
    assert out["outputs"] == {"looked_up": 5, "echoed": "item 5 is lamp"}, out
    assert any(e.get("request") == "GET /items/5" for e in app.seen())


# --------------------------------------------------------------------------- public documents


async def test_public_documents_list_every_tool_without_a_validation_error(wf: Wf) -> None:
    files = sorted(p for p in SPECS.iterdir() if p.suffix in (".json", ".yaml"))
    sources = {f"s{i}": {"kind": "openapi", "spec": str(p), "base_url": "http://127.0.0.1:9"} for i, p in enumerate(files)}
    config = wf.write_config(toml_config(sources))
    async with wf.stdio_client("auto", "--config", str(config)) as c:
        # Discovery runs beside the session: wait until none is pending.
        with anyio.fail_after(120):
            rows = await sources_by_name(c)
            while any(rows[n]["state"] == "pending" for n in sources):
                await anyio.sleep(0.1)
                rows = await sources_by_name(c)
        for name, path in zip(sources, files, strict=True):
            assert rows[name]["state"] == "ready", (path.name, rows[name])
            assert not rows[name].get("rejected"), (path.name, rows[name]["rejected"])
        tools = await all_tools(c)
    counts = {name: sum(1 for t in tools if t.name.startswith(f"{name}__")) for name in sources}
    for name, path in zip(sources, files, strict=True):
        expected = count_operations(path)
        assert counts[name] == expected, (path.name, counts[name], expected)
    petstore = files.index(SPECS / "petstore-3.0.json")
    assert counts[f"s{petstore}"] == 20


def count_operations(path: Path) -> int:
    if path.suffix == ".json":
        doc = json.loads(path.read_text())
    else:
        # The YAML Petstore describes the same operations as the JSON one.
        doc = json.loads(path.with_suffix(".json").read_text())
    methods = {"get", "put", "post", "delete", "options", "head", "patch", "trace"}
    return sum(1 for item in doc.get("paths", {}).values() for m in item if m in methods)


# --------------------------------------------------------------------------- bad input


class Hostile(BaseHTTPRequestHandler):
    """Serves documents and answers that misbehave."""

    spec: bytes = b""
    other_hits: list[str] = []
    other_base: str = ""

    def log_message(self, *_: Any) -> None:
        pass

    def do_GET(self) -> None:  # noqa: N802 - the stdlib's name
        if self.path == "/openapi.json":
            self.send_response(200)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(self.spec)))
            self.end_headers()
            self.wfile.write(self.spec)
        elif self.path.startswith("/huge"):
            # Announces 10 GB and streams until the client gives up.
            self.send_response(200)
            self.send_header("Content-Type", "application/octet-stream")
            self.send_header("Content-Length", str(10 * 1024**3))
            self.end_headers()
            chunk = b"x" * 65536
            try:
                for _ in range(160_000):
                    self.wfile.write(chunk)
            except OSError:
                pass
        elif self.path.startswith("/hang"):
            time.sleep(20)
        elif self.path.startswith("/spec-away"):
            # The document moved to another host: wf must not follow with the token.
            self.send_response(302)
            self.send_header("Location", f"{Hostile.other_base}/stolen-spec")
            self.send_header("Content-Length", "0")
            self.end_headers()
        elif self.path.startswith("/away"):
            self.send_response(302)
            self.send_header("Location", f"{self.headers['X-Other']}/steal")
            self.send_header("Content-Length", "0")
            self.end_headers()
        else:
            Hostile.other_hits.append(f"{self.path} {self.headers.get('Authorization')}")
            self.send_response(200)
            self.send_header("Content-Length", "2")
            self.end_headers()
            self.wfile.write(b"{}")


def hostile_server() -> tuple[ThreadingHTTPServer, str]:
    server = ThreadingHTTPServer(("127.0.0.1", 0), Hostile)
    server.daemon_threads = True
    threading.Thread(target=server.serve_forever, daemon=True).start()
    return server, f"http://127.0.0.1:{server.server_address[1]}"


def simple_op(op_id: str, path: str) -> dict[str, Any]:
    return {path: {"get": {"operationId": op_id, "parameters": [
        {"name": "X-Other", "in": "header", "schema": {"type": "string"}}],
        "responses": {"200": {"description": "ok"}}}}}


async def test_bad_inputs_each_get_a_clear_error_and_the_rest_keeps_serving(wf: Wf, tmp_path: Path) -> None:
    server, base = hostile_server()
    other, other_base = hostile_server()
    Hostile.other_base = other_base
    try:
        paths: dict[str, Any] = {}
        for op_id, path in (("huge", "/huge"), ("hang", "/hang"), ("away", "/away")):
            paths.update(simple_op(op_id, path))
        Hostile.spec = json.dumps({"openapi": "3.0.3", "info": {"title": "h", "version": "1"},
                                   "servers": [{"url": base}], "paths": paths}).encode()
        big = tmp_path / "big.json"
        big.write_text('{"openapi": "3.1.0", "info": {"title": "b", "version": "1"}, "x": "' + "a" * (50 * 1024 * 1024) + '"}')
        external = tmp_path / "external.yaml"
        external.write_text(
            "openapi: 3.0.3\ninfo: {title: e, version: '1'}\npaths:\n  /a:\n    get:\n      responses:\n"
            "        '200':\n          description: ok\n          content:\n            application/json:\n"
            "              schema: {$ref: 'https://elsewhere.example/schemas.yaml#/Pet'}\n"
        )
        many: dict[str, Any] = {}
        for i in range(5000):
            many.update(simple_op(f"op{i}", f"/op{i}"))
        many_file = tmp_path / "many.json"
        many_file.write_text(json.dumps({"openapi": "3.1.0", "info": {"title": "m", "version": "1"}, "paths": many}))
        config = wf.write_config(toml_config({
            "hostile": {"kind": "openapi", "spec": f"{base}/openapi.json", "timeout_ms": 1500,
                        "max_response_bytes": 1048576, "auth": {"type": "bearer", "token": "${HOSTILE_TOKEN}"}},
            "big": {"kind": "openapi", "spec": str(big)},
            "external": {"kind": "openapi", "spec": str(external)},
            "many": {"kind": "openapi", "spec": str(many_file), "base_url": base, "exclude": ["op4*"]},
            "moved": {"kind": "openapi", "spec": f"{base}/spec-away", "spec_auth": True,
                      "auth": {"type": "bearer", "token": "${HOSTILE_TOKEN}"}},
        }))
        async with wf.stdio_client("auto", "--config", str(config), env={"HOSTILE_TOKEN": "hostile-secret-55"}) as c:
            # Discovery of 5,000 operations and a 50 MB file takes a while on a
            # loaded machine: wait until no source is still pending.
            with anyio.fail_after(120):
                rows = await sources_by_name(c)
                while any(rows[n]["state"] == "pending" for n in ("big", "external", "many", "hostile", "moved")):
                    await anyio.sleep(0.2)
                    rows = await sources_by_name(c)
            assert rows["big"]["state"] == "failed", rows["big"]
            assert "over max_spec_bytes" in rows["big"]["error"], rows["big"]
            assert rows["external"]["state"] == "failed", rows["external"]
            assert "external $ref" in rows["external"]["error"], rows["external"]
            assert "/paths/~1a/get/responses/200/content/application~1json/schema/$ref" in rows["external"]["error"]
            assert rows["many"]["state"] == "ready" and rows["hostile"]["state"] == "ready", rows
            # A document that redirects to another host: not followed, the token stays home.
            assert rows["moved"]["state"] == "failed" and "302" in rows["moved"]["error"], rows["moved"]
            assert "not followed" in rows["moved"]["error"], rows["moved"]
            tools = await all_tools(c)
            # 5,000 operations less op4, op40..op49, op400..op499, op4000..op4999, listed page by page.
            assert sum(1 for t in tools if t.name.startswith("many__")) == 5000 - 1111
            # 10 GB offered: refused at max_response_bytes.
            r = await call(c, "hostile__huge")
            assert r.is_error and "max_response_bytes" in content_text(r.content), content_text(r.content)
            # A server that hangs: the call times out.
            r = await call(c, "hostile__hang")
            assert r.is_error and "timed out" in content_text(r.content), content_text(r.content)
            # A redirect to another host is not followed: that host never sees the request.
            r = await call(c, "hostile__away", {"X-Other": other_base})
            assert r.is_error and "not followed" in content_text(r.content), content_text(r.content)
            assert Hostile.other_hits == [], Hostile.other_hits
            # wf.std still serves.
            r = await call(c, "wf_std__passthrough", {"value": 1})
            assert not r.is_error
    finally:
        server.shutdown()
        other.shutdown()
