"""Plugin loading: every kind of bad file is refused with one short, precise
reason, the good plugins still load, and a plugin that panics never takes the
host down.

`wf plugins --json --plugins DIR` prints
  {"loaded": [{"name", "version", "api_version", "file", "kinds"}],
   "refused": [{"file", "reason"}],
   "supported_api": "..."}
and exits 1 when it refused something (0 with --allow-refused); the folder of the `wf` executable (which holds the real plugins)
is always scanned too.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import anyio
import pytest
from mcp import MCPError

from conftest import REPO, STD_PLUGIN, Wf, all_tools, content_text

STD_TOOLS = {
    f"wf_std__{n}"
    for n in ("runtime_error", "passthrough", "const", "template", "json_get", "merge", "assert", "sleep")
}
OP_TIMEOUT = 30

# How each bad file is put into the plugins folder, and what its refusal must say
# (case-insensitive substrings of `reason`).
GARBAGE = "garbage.so"
PLAIN = "libplain.so"
BAD_FILES: dict[str, list[str]] = {
    GARBAGE: ["not a loadable library"],
    PLAIN: ["not a wf plugin"],
    "bad-layout": ["layout"],
    "bad-version": ["incompatible wf-plugin-api", "2.0.0"],
    "ctor-panics": ["constructor panicked", "boom in constructor"],
    "ctor-fails": ["constructor failed", "database missing"],
}
CALL_PANICS_COPY = "libfixture_call_panics_copy.so"


def api_version() -> str:
    """wf-plugin-api's version, from its Cargo.toml."""
    text = (REPO / "plugin-api" / "Cargo.toml").read_text()
    m = re.search(r'^version\s*=\s*"([^"]+)"', text, re.M)
    assert m, "no version in plugin-api/Cargo.toml"
    return m.group(1)


def put_bad_file(wf: Wf, what: str, plain_c_lib: Path) -> Path:
    """Puts one bad file into the plugins folder; returns its path there."""
    if what == GARBAGE:
        path = wf.plugin_dir / GARBAGE
        path.write_text("this is a text file, not a shared library\n")
        return path
    if what == PLAIN:
        return wf.install_file(plain_c_lib, PLAIN)
    return wf.install(what)


def put_all_bad_files(wf: Wf, plain_c_lib: Path) -> dict[str, Path]:
    return {what: put_bad_file(wf, what, plain_c_lib) for what in BAD_FILES}


def in_dir(entries: list[dict[str, Any]], d: Path) -> list[dict[str, Any]]:
    """Entries whose `file` lies in folder `d`."""
    return [e for e in entries if Path(e["file"]).parent.resolve() == d.resolve()]


def check_shape(doc: dict[str, Any]) -> None:
    assert set(doc) >= {"loaded", "refused", "supported_api"}, doc
    assert isinstance(doc["supported_api"], str) and doc["supported_api"], doc
    for p in doc["loaded"]:
        assert set(p) >= {"name", "version", "api_version", "file", "kinds"}, p
        assert isinstance(p["kinds"], list), p
    for r in doc["refused"]:
        assert set(r) >= {"file", "reason"}, r
        reason = r["reason"]
        assert isinstance(reason, str) and reason.strip(), r
        # One short line per failed file, not abi_stable's page-long report.
        assert "\n" not in reason.strip(), f"multi-line reason for {r['file']}:\n{reason}"
        assert len(reason) <= 400, f"reason for {r['file']} is {len(reason)} chars long"


def check_std_loaded(doc: dict[str, Any]) -> None:
    std = [p for p in doc["loaded"] if p["name"] == STD_PLUGIN]
    assert len(std) == 1, f"{STD_PLUGIN} not loaded exactly once: {doc['loaded']}"
    assert std[0]["api_version"] == api_version()
    assert "std" in std[0]["kinds"]


def test_exe_dir_plugins_load_cleanly(wf: Wf) -> None:
    """With an empty plugins folder: the plugins next to `wf` load, nothing is refused."""
    doc = wf.plugins_json()
    check_shape(doc)
    check_std_loaded(doc)
    assert doc["refused"] == []


@pytest.mark.parametrize("what", list(BAD_FILES))
def test_bad_file_is_refused(wf: Wf, plain_c_lib: Path, what: str) -> None:
    path = put_bad_file(wf, what, plain_c_lib)
    doc = wf.plugins_json("--allow-refused")
    check_shape(doc)
    check_std_loaded(doc)
    assert in_dir(doc["loaded"], wf.plugin_dir) == []
    refused = in_dir(doc["refused"], wf.plugin_dir)
    assert len(refused) == 1, refused
    assert Path(refused[0]["file"]).name == path.name
    reason = refused[0]["reason"].lower()
    for needle in BAD_FILES[what]:
        assert needle.lower() in reason, f"{needle!r} not in reason {refused[0]['reason']!r}"


def test_duplicate_plugin_name(wf: Wf) -> None:
    """The same plugin under two file names: one copy loads, the other is refused."""
    a = wf.install("call-panics")
    b = wf.install("call-panics", CALL_PANICS_COPY)
    doc = wf.plugins_json("--allow-refused")
    check_shape(doc)
    check_std_loaded(doc)
    loaded = [p for p in doc["loaded"] if p["name"] == "fixture-call-panics"]
    assert len(loaded) == 1, doc["loaded"]
    refused = in_dir(doc["refused"], wf.plugin_dir)
    assert len(refused) == 1, refused
    assert "duplicate plugin name" in refused[0]["reason"].lower(), refused[0]
    assert {Path(loaded[0]["file"]).name, Path(refused[0]["file"]).name} == {a.name, b.name}
    assert loaded[0]["kinds"] == ["panicky"]


def test_all_bad_files_at_once(wf: Wf, plain_c_lib: Path) -> None:
    files = put_all_bad_files(wf, plain_c_lib)
    wf.install("call-panics")
    wf.install("call-panics", CALL_PANICS_COPY)
    doc = wf.plugins_json("--allow-refused")
    check_shape(doc)
    check_std_loaded(doc)
    refused = {Path(r["file"]).name: r["reason"] for r in in_dir(doc["refused"], wf.plugin_dir)}
    assert len(refused) == len(files) + 1, refused
    for what, path in files.items():
        assert path.name in refused, f"{path.name} not refused: {refused}"
        for needle in BAD_FILES[what]:
            assert needle.lower() in refused[path.name].lower(), (path.name, refused[path.name])


def test_plain_text_report(wf: Wf, plain_c_lib: Path) -> None:
    """`wf plugins` (no --json) prints exactly one line per refused file, with its path."""
    files = list(put_all_bad_files(wf, plain_c_lib).values())
    wf.install("call-panics")
    wf.install("call-panics", CALL_PANICS_COPY)
    doc = wf.plugins_json("--allow-refused")
    refused = [Path(r["file"]) for r in in_dir(doc["refused"], wf.plugin_dir)]
    assert len(refused) == len(files) + 1

    proc = wf.run("plugins", *wf.plugin_args())
    assert proc.returncode == 1, proc.stderr
    lines = proc.stdout.splitlines()
    for name in (p.name for p in refused):
        path = str(wf.plugin_dir / name)
        hits = [line for line in lines if path in line]
        assert len(hits) == 1, f"{len(hits)} lines mention {path}:\n{proc.stdout}"


@pytest.mark.anyio
@pytest.mark.parametrize("mode", ["auto", "legacy"])
async def test_serve_survives_bad_plugins_and_panics(wf: Wf, plain_c_lib: Path, mode: str) -> None:
    put_all_bad_files(wf, plain_c_lib)
    wf.install("call-panics")
    async with wf.stdio_client(mode) as c:
        with anyio.fail_after(OP_TIMEOUT):
            names = {t.name for t in await all_tools(c)}
            assert STD_TOOLS <= names, names
            assert {"panicky__panic", "panicky__ok"} <= names, names

            ok = await c.call_tool("wf_std__const", {"value": 42})
            assert ok.structured_content == {"value": 42}

            try:
                result = await c.call_tool("panicky__panic", {})
            except MCPError as e:
                text = f"{e} {e.error.message} {e.error.data}"
            else:
                assert result.is_error, f"a panicking tool returned success: {result}"
                text = content_text(result.content)
            assert "panicked" in text.lower(), text

            again = await c.call_tool("panicky__ok", {})
            assert not again.is_error, content_text(again.content)
            assert content_text(again.content) == "still here"

            # Still serving the other sources, too.
            ok = await c.call_tool("wf_std__const", {"value": 7})
            assert ok.structured_content == {"value": 7}
