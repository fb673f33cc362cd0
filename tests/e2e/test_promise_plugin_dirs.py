"""Plugin folders, in order: the `wf` executable's own folder, `plugins/` beside
it (an unpacked release archive), `plugins/` beside the config file, the config's `[plugins] dirs` (relative to the config file),
then each `--plugins DIR` in the order given. Every folder is searched, and
when two files hold the same plugin the first one in that order wins and each
later one is refused, naming the winner.

The config lives in a folder of its own here (not the test's root, which is
also the `--plugins` folder the other tests use), and the same third-party
plugin — the example notes plugin — is copied into several folders.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
from pathlib import Path
from typing import Any

import pytest

from conftest import REPO, Wf

EXAMPLE_DEFAULT = REPO / "target" / "examples" / "debug" / "libwf_notes.so"


@pytest.fixture
def notes_plugin() -> Path:
    path = Path(os.environ.get("WF_EXAMPLE_PLUGIN") or EXAMPLE_DEFAULT)
    if not path.exists():
        pytest.fail(f"{path} is missing: build examples/notes-plugin (tests/run does), or set WF_EXAMPLE_PLUGIN")
    return path


def plugins(wf: Wf, config: Path, *extra: Path) -> dict[str, Any]:
    args = ["plugins", "--json", "--config", str(config)]
    for d in extra:
        args += ["--plugins", str(d)]
    proc = wf.run(*args)
    out = json.loads(proc.stdout)
    # `wf plugins` exits 1 exactly when it refused a file (here: the later copies).
    assert proc.returncode == (1 if out["refused"] else 0), proc.stderr
    return out


def layout(wf: Wf, notes_plugin: Path, holders: set[str]) -> tuple[Path, dict[str, Path]]:
    """cfg/wf.toml with `[plugins] dirs = ["more", "../extra"]`, and folders
    beside, more, extra, a, b; the notes plugin copied into `holders`."""
    cfg = wf.root / "cfg"
    folders = {
        "beside": cfg / "plugins",
        "more": cfg / "more",
        "extra": wf.root / "extra",
        "a": wf.root / "a",
        "b": wf.root / "b",
    }
    for name, d in folders.items():
        if d.exists():
            shutil.rmtree(d)
        d.mkdir(parents=True)
        if name in holders:
            shutil.copy2(notes_plugin, d / notes_plugin.name)
    config = cfg / "wf.toml"
    config.write_text('[plugins]\ndirs = ["more", "../extra"]\n')
    return config, folders


def notes_rows(report: dict[str, Any]) -> tuple[list[str], list[tuple[str, str]]]:
    loaded = [p["file"] for p in report["loaded"] if p["name"] == "wf-notes"]
    refused = [(r["file"], r["reason"]) for r in report["refused"]]
    return loaded, refused


def test_plugin_folders_are_searched_in_order_and_the_first_copy_wins(wf: Wf, wf_bin: Path, notes_plugin: Path) -> None:
    config, f = layout(wf, notes_plugin, {"beside", "more", "extra", "a", "b"})
    report = plugins(wf, config, f["a"], f["b"])
    same = lambda p: Path(p).resolve()  # noqa: E731
    assert [same(d) for d in report["dirs"]] == [
        same(wf_bin.parent),
        same(f["beside"]),
        same(f["more"]),
        same(f["extra"]),
        same(f["a"]),
        same(f["b"]),
    ], report["dirs"]
    loaded, refused = notes_rows(report)
    winner = f["beside"] / notes_plugin.name
    assert [same(p) for p in loaded] == [same(winner)], report
    assert [same(p) for p, _ in refused] == [same(f[k] / notes_plugin.name) for k in ("more", "extra", "a", "b")], refused
    for _, reason in refused:
        assert reason.startswith('duplicate plugin name "wf-notes": already loaded from '), reason
        assert same(reason.rsplit(" ", 1)[1]) == same(winner), reason

    # Without the copy beside the config, the config's folders come next...
    config, f = layout(wf, notes_plugin, {"extra", "a", "b"})
    loaded, refused = notes_rows(plugins(wf, config, f["a"], f["b"]))
    assert [same(p) for p in loaded] == [same(f["extra"] / notes_plugin.name)], loaded
    assert [same(p) for p, _ in refused] == [same(f[k] / notes_plugin.name) for k in ("a", "b")], refused

    # ...and every --plugins folder is searched, not only the first.
    config, f = layout(wf, notes_plugin, {"b"})
    loaded, refused = notes_rows(plugins(wf, config, f["a"], f["b"]))
    assert ([same(p) for p in loaded], refused) == ([same(f["b"] / notes_plugin.name)], []), (loaded, refused)


def test_plugins_folder_beside_the_executable_is_searched(wf: Wf, wf_bin: Path, tmp_path: Path) -> None:
    """An unpacked release archive: `wf` with its bundled plugins in `plugins/` beside it,
    and no library next to the executable itself (unlike `cargo build`'s output)."""
    dist = tmp_path / "wf-unpacked"
    (dist / "plugins").mkdir(parents=True)
    shutil.copy2(wf_bin, dist / "wf")
    std = wf_bin.parent / "libwf_source_std.so"
    shutil.copy2(std, dist / "plugins" / std.name)
    proc = subprocess.run(
        [str(dist / "wf"), "plugins", "--json"],
        cwd=tmp_path,
        env={**os.environ, "WF_LOG": "warn"},
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert proc.returncode == 0, proc.stderr
    report = json.loads(proc.stdout)
    files = {row["name"]: row["file"] for row in report["loaded"]}
    assert files == {"wf-source-std": str(dist / "plugins" / std.name)}, report
    assert [Path(d) for d in report["dirs"]] == [dist, dist / "plugins"], report
