"""An upstream MCP server on the official Python SDK's server side (`mcp` 2.3.0, pinned
in requirements.txt), which speaks 2026-07-28 and 2025-11-25, for cells of the
generation matrix (test_generations_python.py). Over stdio, or with
`--http PORT [sse|json]` over streamable HTTP on 127.0.0.1:PORT/mcp (replies as SSE
streams, the default, or as JSON).

Tools:
  sample    asks the client's model in an input-required round and returns its text
  elicit    asks the client's user for a name (form elicitation) in a round
  elicit_url
            asks the client's user to open a URL (URL-mode elicitation) in a round
  roots     asks for the client's roots in a round and returns their URIs
  sample_push
            asks the client's model with a request mid-call (`create_message`), as
            servers written for 2025-11-25 do
  progress  reports `steps` progress steps when the call has a progress token
  log       logs one line at each of debug, info and warning
  wait      appends `started` to the file `marker`, waits until the call is cancelled
            (at most 60 s), then appends `cancelled`

  meta      returns the request's `_meta` keys outside `io.modelcontextprotocol/` (and not its
            progress token), and a
            `_meta` of its own on the result

  touch     publishes an update of the resource `uri` to `subscriptions/listen` streams
  add_tool  adds a tool `added` and publishes that the tool list changed

Prompt `greet`, whose argument `name` completes (`Ada`, `Alan`, `Grace`); prompt
`refuse`, which fails with a JSON-RPC error carrying a code and `data`; resource
`test://watched`.
"""

from __future__ import annotations

import json
import sys
import warnings
from pathlib import Path

import anyio

import mcp_types as types
from mcp.server.mcpserver import Context, MCPServer
from mcp.shared.exceptions import MCPError

warnings.simplefilter("ignore")  # the logging capability's deprecation (SEP-2577)

server = MCPServer("wf-py-generations-upstream")


@server.tool(description="Asks the client to sample a message")
async def sample(prompt: str, ctx: Context) -> str | types.InputRequiredResult:
    answer = (ctx.input_responses or {}).get("llm")
    if answer is None:
        ask = types.CreateMessageRequest(
            params=types.CreateMessageRequestParams(
                messages=[types.SamplingMessage(role="user", content=types.TextContent(type="text", text=prompt))],
                max_tokens=50,
            )
        )
        return types.InputRequiredResult(input_requests={"llm": ask})
    content = getattr(answer, "content", None)
    if isinstance(answer, dict):
        content = answer.get("content")
    if isinstance(content, list):
        content = content[0]
    text = content.get("text") if isinstance(content, dict) else getattr(content, "text", None)
    return f"sampled: {text}"


@server.tool(description="Asks the client to sample a message, mid-call")
async def sample_push(prompt: str, ctx: Context) -> str:
    content = types.SamplingMessage(role="user", content=types.TextContent(type="text", text=prompt))
    answer = await ctx.request_context.session.create_message(
        [content], max_tokens=50, related_request_id=ctx.request_id
    )
    return f"sampled: {getattr(answer.content, 'text', None)}"


@server.tool(description="Asks the client's user for a name")
async def elicit(ctx: Context) -> str | types.InputRequiredResult:
    answer = (ctx.input_responses or {}).get("who")
    if answer is None:
        schema = {"type": "object", "properties": {"name": {"type": "string"}}, "required": ["name"]}
        ask = types.ElicitRequest(
            params=types.ElicitRequestFormParams(message="Who are you?", requested_schema=schema)
        )
        return types.InputRequiredResult(input_requests={"who": ask})
    if not isinstance(answer, dict):
        answer = answer.model_dump(mode="json", exclude_none=True)
    return f"elicited: {answer.get('action')} {(answer.get('content') or {}).get('name')}"


@server.tool(description="Asks the client's user to open a URL")
async def elicit_url(ctx: Context) -> str | types.InputRequiredResult:
    answer = (ctx.input_responses or {}).get("signin")
    if answer is None:
        ask = types.ElicitRequest(
            params=types.ElicitRequestURLParams(
                message="Please sign in", url="https://example.com/signin", elicitation_id="py-signin"
            )
        )
        return types.InputRequiredResult(input_requests={"signin": ask})
    if not isinstance(answer, dict):
        answer = answer.model_dump(mode="json", exclude_none=True)
    return f"url elicitation: {answer.get('action')}"


@server.tool(description="Asks for the client's roots")
async def roots(ctx: Context) -> str | types.InputRequiredResult:
    answer = (ctx.input_responses or {}).get("where")
    if answer is None:
        return types.InputRequiredResult(input_requests={"where": types.ListRootsRequest()})
    if not isinstance(answer, dict):
        answer = answer.model_dump(mode="json", exclude_none=True)
    return "roots: " + ",".join(r["uri"] for r in answer.get("roots", []))


@server.tool(description="Reports progress")
async def progress(steps: int, ctx: Context) -> str:
    for i in range(1, steps + 1):
        await ctx.report_progress(i, steps, f"step {i}")
    return f"progress: {steps} steps"


@server.tool(description="Logs three lines")
async def log(ctx: Context) -> str:
    await ctx.debug("debug line")
    await ctx.info("info line")
    await ctx.warning("warning line")
    return "logged"


@server.tool(description="Waits until cancelled")
async def wait(marker: str) -> str:
    with Path(marker).open("a") as f:
        f.write("started\n")
    try:
        await anyio.sleep(60)
    except anyio.get_cancelled_exc_class():
        with Path(marker).open("a") as f:
            f.write("cancelled\n")
        raise
    return "waited"


@server.tool(description="Echoes the request's own `_meta` keys")
async def meta(ctx: Context) -> types.CallToolResult:
    reserved = ("io.modelcontextprotocol/", "progress_token", "progressToken")
    got = {k: v for k, v in (ctx.request_context.meta or {}).items() if not k.startswith(reserved)}
    return types.CallToolResult(
        content=[types.TextContent(type="text", text=json.dumps(got))],
        _meta={"example.com/upstream": "from the upstream"},
    )


@server.tool(description="Says the resource `uri` was updated")
async def touch(uri: str, ctx: Context) -> str:
    await ctx.notify_resource_updated(uri)
    return "touched"


def added() -> str:
    return "added here"


@server.tool(description="Adds the tool `added`")
async def add_tool(ctx: Context) -> str:
    server.add_tool(added, name="added", description="Added at run time")
    await ctx.notify_tools_changed()
    return "added"


@server.resource("test://watched", description="A resource to subscribe to")
def watched() -> str:
    return "watched"


@server.prompt(description="Greets someone")
def greet(name: str) -> str:
    return f"Hello {name}"


@server.prompt(description="Fails with a JSON-RPC error")
def refuse() -> str:
    raise MCPError(-32050, "the upstream refuses", {"reason": "test", "n": 1})


@server.completion()
async def complete(ref: object, argument: types.CompletionArgument, context: object) -> types.Completion | None:
    if isinstance(ref, types.PromptReference) and ref.name == "greet" and argument.name == "name":
        return types.Completion(values=[n for n in ("Ada", "Alan", "Grace") if n.startswith(argument.value)])
    return None


if __name__ == "__main__":
    if sys.argv[1:2] == ["--http"]:
        shape = sys.argv[3] if len(sys.argv) > 3 else "sse"
        server.run("streamable-http", port=int(sys.argv[2]), json_response=shape == "json")
    else:
        server.run()
