"""An upstream MCP server on the official Python SDK's server side (`mcp` 2.3.0, pinned
in requirements.txt), which speaks 2026-07-28 and 2025-11-25, for cells of the
generation matrix (test_generations_python.py). Over stdio.

Tools:
  sample    asks the client's model in an input-required round and returns its text
  progress  reports `steps` progress steps when the call has a progress token
  log       logs one line at each of debug, info and warning
"""

from __future__ import annotations

import warnings

import mcp_types as types
from mcp.server.mcpserver import Context, MCPServer

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


if __name__ == "__main__":
    server.run()
