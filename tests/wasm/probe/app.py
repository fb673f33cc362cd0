"""probe: a component the e2e tests (tests/e2e/test_wasm_sandbox.py) use to
check what wf grants a WebAssembly component and how it stops one: each tool
reaches for one thing (a file, an environment value, a socket) or misbehaves
in one way (loops, allocates without bound, traps). Built by tests/wasm/build.sh.

A capability probe answers with what the guest saw: its result on success, an
isError result naming the guest's own exception when the host refused.
"""

import json
import os

from componentize_py_types import Err
from wit_world import exports
from wit_world.imports import host
from wit_world.imports.types import Capabilities, Content_Text, Error, ErrorCode, Metadata, Tool, ToolResult


def schema(**props: str) -> str:
    return json.dumps({"type": "object", "properties": {k: {"type": t} for k, t in props.items()},
                       "required": sorted(props), "additionalProperties": False})


TOOLS = {
    "echo": ("Returns its text", schema(text="string")),
    "read_file": ("Reads a file", schema(path="string")),
    "write_file": ("Writes a file", schema(path="string", text="string")),
    "env": ("Reads an environment value", schema(name="string")),
    "connect": ("Opens a TCP connection", schema(host="string", port="integer")),
    "spin": ("Loops forever", schema()),
    "allocate": ("Allocates 1 MiB blocks until it has `mb` of them", schema(mb="integer")),
    "trap": ("Raises an exception the guest does not handle (the component traps)", schema()),
}


def probe(name: str, args: dict) -> str:
    if name == "echo":
        return args["text"]
    if name == "read_file":
        with open(args["path"]) as f:
            return f.read()
    if name == "write_file":
        with open(args["path"], "w") as f:
            f.write(args["text"])
        return "written"
    if name == "env":
        value = os.environ.get(args["name"])
        if value is None:
            raise LookupError(f"no environment value {args['name']}")
        return value
    if name == "connect":
        import socket
        with socket.create_connection((args["host"], args["port"]), timeout=10):
            return "connected"
    raise KeyError(name)


class Guest(exports.Guest):
    def describe(self) -> Metadata:
        return Metadata("probe", "1.0.0", "Reaches for what it was not granted, on request")

    def catalog(self) -> Capabilities:
        tools = [Tool(n, d, s, None) for n, (d, s) in TOOLS.items()]
        if json.loads(host.settings()).get("broken_schema"):
            # An input schema that is not an object schema: `wf check --deep` names it.
            tools.append(Tool("broken", "Has a broken input schema", json.dumps({"type": "array"}), None))
        return Capabilities(tools, [], [], [], [])

    def call_tool(self, name: str, arguments: str) -> ToolResult:
        args = json.loads(arguments)
        if name == "spin":
            n = 0
            while True:
                n += 1
        if name == "allocate":
            blocks = [bytearray(1 << 20) for _ in range(args["mb"])]
            return ToolResult([Content_Text(f"allocated {len(blocks)} MiB")], None, False)
        if name == "trap":
            raise RuntimeError("the probe traps on purpose")
        if name not in TOOLS:
            raise Err(Error(ErrorCode.NOT_FOUND, f"no tool `{name}`", None))
        try:
            return ToolResult([Content_Text(probe(name, args))], None, False)
        except Exception as e:  # what the guest saw, for the test to read
            return ToolResult([Content_Text(f"{type(e).__name__}: {e}")], None, True)

    def run_node(self, name: str, input: str) -> str:
        raise Err(Error(ErrorCode.NOT_FOUND, f"no node `{name}`", None))

    def read_resource(self, uri: str) -> list:
        raise Err(Error(ErrorCode.NOT_FOUND, f"no resource `{uri}`", None))

    def get_prompt(self, name: str, arguments: list) -> None:
        raise Err(Error(ErrorCode.NOT_FOUND, f"no prompt `{name}`", None))
