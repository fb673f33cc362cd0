"""A newcomer's plugin-build mistakes each get a line that says what to do
(docs/operator-manual.md, "Plugin folders"), and `wf plugins` exits 1 when it
refused something (`--allow-refused` for scripts that want 0):

- a Rust library without `export_plugin!` (tests/fixtures/no-export);
- an `rlib`-only build, which leaves no library in the folder;
- a Rust `dylib` instead of a `cdylib` (tests/fixtures/rust-dylib): loads, with a warning;
- two plugins declaring the same source kind: the second is refused;
- dangling links, link loops and folders named `*.so`.
"""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path
from typing import Any

from conftest import Wf, dylib_filename


def plugins(wf: Wf, *extra: str, expect: int) -> dict[str, Any]:
    """`wf plugins --json`, which must exit `expect` and print its JSON either way."""
    proc = wf.run("plugins", "--json", *wf.plugin_args(), *extra)
    assert proc.returncode == expect, f"exit {proc.returncode}, wanted {expect}:\n{proc.stdout}\n{proc.stderr}"
    return json.loads(proc.stdout)


def refused_here(wf: Wf, doc: dict[str, Any]) -> dict[str, str]:
    """Refusals of files in the test's plugins folder, by file name."""
    d = wf.plugin_dir.resolve()
    return {Path(r["file"]).name: r["reason"] for r in doc["refused"] if Path(r["file"]).parent.resolve() == d}


def notes_here(wf: Wf, doc: dict[str, Any]) -> list[str]:
    return [n["note"] for n in doc["notes"] if Path(n["path"]).resolve() == wf.plugin_dir.resolve()]


def test_missing_export_plugin_says_what_to_do(wf: Wf) -> None:
    lib = wf.install("no-export")
    doc = plugins(wf, expect=1)
    reason = refused_here(wf, doc)[lib.name]
    assert "not a wf plugin" in reason, reason
    assert "export_plugin!" in reason, reason
    assert "\n" not in reason


def test_c_library_is_not_told_about_export_plugin(wf: Wf, plain_c_lib: Path) -> None:
    lib = wf.install_file(plain_c_lib)
    reason = refused_here(wf, plugins(wf, expect=1))[lib.name]
    assert "not a wf plugin" in reason and "export_plugin" not in reason, reason


def test_exit_code_and_allow_refused(wf: Wf) -> None:
    wf.install("no-export")
    # Refused: exit 1 in both output forms, 0 with --allow-refused; same report.
    strict = plugins(wf, expect=1)
    lenient = plugins(wf, "--allow-refused", expect=0)
    assert refused_here(wf, strict) == refused_here(wf, lenient) != {}
    text = wf.run("plugins", *wf.plugin_args())
    assert text.returncode == 1, text.stderr
    assert "export_plugin!" in text.stdout
    assert wf.run("plugins", *wf.plugin_args(), "--allow-refused").returncode == 0
    # Nothing refused: exit 0 without the flag.
    (wf.plugin_dir / dylib_filename("fixture_no_export")).unlink()
    wf.install("call-panics")
    assert refused_here(wf, plugins(wf, expect=0)) == {}


def test_rlib_only_build_leaves_a_line(wf: Wf) -> None:
    """What `crate-type = ["rlib"]` leaves in a folder: no library, and a line that says why."""
    rlib = wf.fixtures_dir / "libfixture_no_export.rlib"
    assert rlib.is_file(), f"{rlib} missing: the no-export fixture builds an rlib too"
    shutil.copy2(rlib, wf.plugin_dir / rlib.name)
    doc = plugins(wf, expect=0)
    assert refused_here(wf, doc) == {}
    notes = notes_here(wf, doc)
    assert len(notes) == 1, doc["notes"]
    assert "no plugin library" in notes[0] and rlib.name in notes[0] and "cdylib" in notes[0], notes[0]
    text = wf.run("plugins", *wf.plugin_args()).stdout
    assert [line for line in text.splitlines() if str(wf.plugin_dir) in line and "cdylib" in line], text


def test_empty_folder_leaves_a_line(wf: Wf) -> None:
    notes = notes_here(wf, plugins(wf, expect=0))
    assert len(notes) == 1 and "no plugin library" in notes[0], notes


def test_rust_dylib_loads_with_a_warning(wf: Wf) -> None:
    lib = wf.install("rust-dylib")
    doc = plugins(wf, expect=0)
    mine = [p for p in doc["loaded"] if Path(p["file"]).name == lib.name]
    assert len(mine) == 1, doc["loaded"]
    warnings = mine[0]["warnings"]
    assert len(warnings) == 1 and "dylib" in warnings[0] and 'crate-type = ["cdylib"]' in warnings[0], warnings
    # Correct cdylib plugins get no warning.
    for p in doc["loaded"]:
        if p["name"] == "wf-source-std":
            assert p["warnings"] == [], p
    text = wf.run("plugins", *wf.plugin_args()).stdout
    assert [line for line in text.splitlines() if line.strip().startswith("warning:") and "cdylib" in line], text


def test_second_plugin_of_a_kind_is_refused(wf: Wf) -> None:
    first = wf.install("call-panics")  # kind `panicky`; its file name sorts first
    second = wf.install("rust-dylib")  # kinds `rustdylib` and `panicky`
    doc = plugins(wf, expect=1)
    loaded = {Path(p["file"]).name for p in doc["loaded"]}
    assert first.name in loaded and second.name not in loaded, loaded
    reason = refused_here(wf, doc)[second.name]
    assert 'source kind "panicky" is already served by plugin "fixture-call-panics"' in reason, reason


def test_links_and_folders_named_like_libraries_get_a_line_each(wf: Wf) -> None:
    ext = dylib_filename("x").rsplit(".", 1)[1]
    d = wf.plugin_dir
    os.symlink("missing." + ext, d / f"dangling.{ext}")
    os.symlink(f"loop-b.{ext}", d / f"loop-a.{ext}")
    os.symlink(f"loop-a.{ext}", d / f"loop-b.{ext}")
    (d / f"folder.{ext}").mkdir()
    good = wf.install("call-panics")
    doc = plugins(wf, expect=1)
    refused = refused_here(wf, doc)
    assert "dangling symbolic link" in refused[f"dangling.{ext}"], refused
    assert "symbolic link loop" in refused[f"loop-a.{ext}"], refused
    assert "symbolic link loop" in refused[f"loop-b.{ext}"], refused
    assert "a directory, not a library" in refused[f"folder.{ext}"], refused
    assert len(refused) == 4, refused
    assert good.name in {Path(p["file"]).name for p in doc["loaded"]}
    text = wf.run("plugins", *wf.plugin_args()).stdout.splitlines()
    for name in refused:
        assert len([line for line in text if str(d / name) in line]) == 1, (name, text)
