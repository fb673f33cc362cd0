"""A small upstream MCP server for the promise tests (test_promise_*.py), built
with the official `mcp` package's server side. It does what the Rust fixture
upstream does not:

- `--http PORT`: streamable HTTP on 127.0.0.1:PORT, appending every request's
  headers (one JSON object per line) to `--record FILE`;
- `--tools-file FILE`: extra tools named one per line in FILE; the `add_tool`
  tool appends a name there and sends `notifications/tools/list_changed`, so a
  fresh session (wf's one-shot discovery) lists it too;
- `--list-delay-ms N`: every tools/list waits N ms (discovery timeouts);
- `--prompts-delay-file FILE`: once FILE exists, every prompts/list waits the
  number of ms FILE holds, then also lists a prompt `late` (live list timeouts);
- `--stderr LINE`: writes LINE to stderr at start (log filtering).

stdio by default.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any

import anyio
from mcp.server.mcpserver import Context, MCPServer
from mcp_types.version import MODERN_PROTOCOL_VERSIONS


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--http", type=int)
    ap.add_argument("--record")
    ap.add_argument("--tools-file")
    ap.add_argument("--list-delay-ms", type=int, default=0)
    ap.add_argument("--prompts-delay-file")
    ap.add_argument("--stderr")
    args = ap.parse_args()
    if args.stderr:
        print(args.stderr, file=sys.stderr, flush=True)

    server = MCPServer("promise-upstream")
    tools_file = Path(args.tools_file) if args.tools_file else None

    def register(name: str) -> None:
        async def extra() -> str:
            return f"I am {name}"

        server.add_tool(extra, name=name, description=f"An added tool ({name})")

    if tools_file is not None and tools_file.exists():
        for name in tools_file.read_text().split():
            register(name)

    @server.tool(description="Returns its argument")
    def echo(text: str) -> str:
        return text

    @server.tool(description="Adds a tool named `name` and announces tools/list_changed")
    async def add_tool(name: str, ctx: Context) -> str:
        assert tools_file is not None, "--tools-file is required for add_tool"
        with tools_file.open("a") as f:
            f.write(name + "\n")
        register(name)
        # A 2025-11-25 client hears it on its session; a 2026-07-28 one (wf with
        # `protocol = "auto"`) on its `subscriptions/listen` stream.
        if ctx.session.protocol_version in MODERN_PROTOCOL_VERSIONS:
            await ctx.notify_tools_changed()
        else:
            await ctx.session.send_tool_list_changed()
        return f"added {name}"

    @server.prompt(description="A prompt")
    def hello() -> str:
        return "hello"

    low = server._lowlevel_server  # noqa: SLF001 (a test server wraps its list handlers)

    def wrap(method: str, before: Any) -> None:
        entry = low._request_handlers[method]  # noqa: SLF001

        async def wrapped(ctx: Any, params: Any) -> Any:
            await before()
            return await entry.handler(ctx, params)

        low.add_request_handler(method, entry.params_type, wrapped)

    if args.list_delay_ms:

        async def tools_delay() -> None:
            await anyio.sleep(args.list_delay_ms / 1000)

        wrap("tools/list", tools_delay)

    if args.prompts_delay_file:
        delay_file = Path(args.prompts_delay_file)
        late: list[str] = []

        async def prompts_delay() -> None:
            if delay_file.exists():
                await anyio.sleep(int(delay_file.read_text()) / 1000)
                if not late:
                    late.append("late")
                    server.prompt(name="late", description="Listed once the delay file exists")(lambda: "late")

        wrap("prompts/list", prompts_delay)

    if args.http is None:
        server.run()
        return

    import uvicorn

    app = server.streamable_http_app()
    record = Path(args.record) if args.record else None

    async def recording(scope: Any, receive: Any, send: Any) -> None:
        if scope["type"] == "http" and record is not None:
            headers = {k.decode("latin-1").lower(): v.decode("latin-1") for k, v in scope["headers"]}
            with record.open("a") as f:
                f.write(json.dumps({"method": scope["method"], "path": scope["path"], "headers": headers}) + "\n")
        await app(scope, receive, send)

    uvicorn.run(recording, host="127.0.0.1", port=args.http, log_level="warning", lifespan="on")


if __name__ == "__main__":
    main()
