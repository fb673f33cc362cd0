"""units: a wf source written in Python, built into a WebAssembly component
with componentize-py (see docs/wasm-plugins.md). Converts between units of
length, mass and temperature: two tools (`convert`, also a workflow node, and
`convert_many`, which reports progress and asks the caller for a missing
unit), a prompt and a resource.

    componentize-py -d WIT_DIR -w source componentize app -o units.wasm
"""

import json

from componentize_py_types import Err
from wit_world import exports
from wit_world.imports import host
from wit_world.imports.types import (
    Capabilities, Content_Text, ElicitAction, Error, ErrorCode, LogLevel, Metadata, NodeSpec,
    Prompt, PromptArgument, PromptMessage, PromptResult, ResourceBody_Text, ResourceContents,
    ResourceEntry, Role, Tool, ToolResult,
)

# unit -> (dimension, factor to the dimension's base unit); temperatures are affine (below).
UNITS = {
    "m": ("length", 1.0), "km": ("length", 1000.0), "ft": ("length", 0.3048), "mi": ("length", 1609.344),
    "kg": ("mass", 1.0), "g": ("mass", 0.001), "lb": ("mass", 0.45359237),
    "C": ("temperature", 1.0), "F": ("temperature", 1.0), "K": ("temperature", 1.0),
}
TO_KELVIN = {"C": lambda v: v + 273.15, "F": lambda v: (v - 32) * 5 / 9 + 273.15, "K": lambda v: v}
FROM_KELVIN = {"C": lambda v: v - 273.15, "F": lambda v: (v - 273.15) * 9 / 5 + 32, "K": lambda v: v}
UNIT = {"type": "string", "enum": sorted(UNITS)}
CONVERT_IN = {"type": "object", "properties": {"value": {"type": "number"}, "from": UNIT, "to": UNIT},
              "required": ["value", "from", "to"], "additionalProperties": False}
CONVERT_OUT = {"type": "object", "properties": {"value": {"type": "number"}, "unit": {"type": "string"}},
               "required": ["value", "unit"]}
MANY_IN = {"type": "object", "properties": {"values": {"type": "array", "items": {"type": "number"}},
                                             "from": UNIT, "to": UNIT},
           "required": ["values", "from"], "additionalProperties": False}


class Invalid(Exception):
    """Bad arguments: an isError result for a tool, `invalid-arguments` for a node."""


def convert(value: float, src: str, dst: str) -> float:
    for unit in (src, dst):
        if unit not in UNITS:
            raise Invalid(f"unknown unit `{unit}` (known: {', '.join(sorted(UNITS))})")
    (dim, f_src), (dim_dst, f_dst) = UNITS[src], UNITS[dst]
    if dim != dim_dst:
        raise Invalid(f"cannot convert {dim} (`{src}`) to {dim_dst} (`{dst}`)")
    if dim == "temperature":
        return round(FROM_KELVIN[dst](TO_KELVIN[src](value)), 9)
    return round(value * f_src / f_dst, 9)


def convert_node(args: dict) -> dict:
    if not isinstance(args.get("value"), (int, float)):
        raise Invalid("argument `value` must be a number")
    return {"value": convert(args["value"], args.get("from"), args.get("to")), "unit": args.get("to")}


def convert_many(args: dict) -> dict:
    values, src, dst = args.get("values") or [], args.get("from"), args.get("to")
    if dst is None:
        # Ask the person behind the call (fails with `unsupported` when nobody can be asked).
        schema = {"type": "object", "properties": {"to": {"type": "string", "enum": sorted(UNITS)}}, "required": ["to"]}
        answer = host.elicit(f"Convert {len(values)} values from {src} to which unit?", json.dumps(schema))
        if answer.action != ElicitAction.ACCEPT or answer.content is None:
            raise Invalid("no target unit: the caller did not choose one")
        dst = json.loads(answer.content)["to"]
    out = []
    for i, v in enumerate(values):
        if host.cancelled():
            raise Err(Error(ErrorCode.CANCELLED, "cancelled", None))
        out.append(convert(v, src, dst))
        host.progress(i + 1, len(values), f"{i + 1} of {len(values)}")
    host.log(LogLevel.INFO, f"converted {len(values)} values from {src} to {dst}")
    return {"values": out, "unit": dst}


def table() -> str:
    rows = [f"| `{u}` | {dim} | {f:.12g} |" for u, (dim, f) in sorted(UNITS.items()) if dim != "temperature"]
    return "# Units\n\n| unit | dimension | in base units |\n|---|---|---|\n" + "\n".join(rows) + \
        "\n\nTemperatures: `C`, `F`, `K` (converted through kelvin).\n"


class Guest(exports.Guest):
    def describe(self) -> Metadata:
        return Metadata("units", "1.0.0", "Converts between units of length, mass and temperature")

    def catalog(self) -> Capabilities:
        node = NodeSpec("convert", "Converts a value from one unit to another", json.dumps(CONVERT_IN),
                        json.dumps(CONVERT_OUT), False, False)
        many = Tool("convert_many", "Converts a list of values; asks for the target unit when `to` is missing",
                    json.dumps(MANY_IN), None)
        prompt = Prompt("explain_unit", "Asks the model to explain a unit",
                        [PromptArgument("unit", "A unit symbol, such as `mi`", True)])
        resource = ResourceEntry("units://table", "Unit table", "Every unit this source knows", "text/markdown")
        return Capabilities([many], [node], [prompt], [resource], [])

    def call_tool(self, name: str, arguments: str) -> ToolResult:
        run = {"convert": convert_node, "convert_many": convert_many}.get(name)
        if run is None:
            raise Err(Error(ErrorCode.NOT_FOUND, f"no tool `{name}`", None))
        try:
            out = json.dumps(run(json.loads(arguments)))
        except Invalid as e:
            return ToolResult([Content_Text(str(e))], None, True)
        return ToolResult([Content_Text(out)], out, False)

    def run_node(self, name: str, input: str) -> str:
        if name != "convert":
            raise Err(Error(ErrorCode.NOT_FOUND, f"no node `{name}`", None))
        try:
            return json.dumps(convert_node(json.loads(input)))
        except Invalid as e:
            raise Err(Error(ErrorCode.INVALID_ARGUMENTS, str(e), None))

    def read_resource(self, uri: str) -> list[ResourceContents]:
        if uri != "units://table":
            raise Err(Error(ErrorCode.NOT_FOUND, f"no resource `{uri}`", None))
        return [ResourceContents(uri, "text/markdown", ResourceBody_Text(table()))]

    def get_prompt(self, name: str, arguments: list[tuple[str, str]]) -> PromptResult:
        unit = dict(arguments).get("unit", "")
        if name != "explain_unit" or unit not in UNITS:
            raise Err(Error(ErrorCode.INVALID_ARGUMENTS if name == "explain_unit" else ErrorCode.NOT_FOUND,
                            f"no unit `{unit}`" if name == "explain_unit" else f"no prompt `{name}`", None))
        dim = UNITS[unit][0]
        text = f"Explain the unit `{unit}` ({dim}) to a newcomer, with one everyday example."
        return PromptResult(f"Explain {unit}", [PromptMessage(Role.USER, Content_Text(text))])
