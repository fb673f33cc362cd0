"""dist/bolt, the post-link layout step of dist/build (docs/distribution.md,
"Post-link layout (BOLT)").

The layout itself needs llvm-bolt and a release link with --emit-relocs (the
better part of an hour): dist/build runs it and its last check serves a call
through what it wrote. Here, what a wrong call gets, with or without llvm-bolt
installed: a clear line and no half-written folder.
"""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

from conftest import REPO, dylib_filename

BOLT = str(REPO / "dist" / "bolt")


def run(*args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run([BOLT, *args], capture_output=True, text=True, timeout=60, env={**os.environ, **(env or {})})


def test_a_wrong_call_gets_its_usage() -> None:
    for args in ([], ["one"], ["a", "b", "c"]):
        done = run(*args)
        assert done.returncode == 2, done
        assert "usage: dist/bolt DIR FIXTURE | dist/bolt --check" in done.stderr


def test_a_missing_llvm_bolt_names_the_package_and_the_way_out() -> None:
    done = run("--check", env={"LLVM_BOLT": "/nonexistent/llvm-bolt"})
    assert done.returncode == 1, done
    assert "apt-get install bolt-19" in done.stderr
    assert "dist/build --no-bolt" in done.stderr


def test_files_linked_without_their_relocations_are_refused_untouched(
    wf_bin: Path, fixture_upstream_bin: Path, tmp_path: Path
) -> None:
    # The test build's files, linked as cargo links them: no --emit-relocs.
    names = ["wf", dylib_filename("wf_source_mcp"), dylib_filename("wf_source_std")]
    for name in names:
        shutil.copy(wf_bin.parent / name, tmp_path / name)
    before = {name: (tmp_path / name).read_bytes() for name in names}
    done = run(str(tmp_path), str(fixture_upstream_bin))
    assert done.returncode == 1, done
    assert f"{tmp_path}/wf was not linked with --emit-relocs" in done.stderr
    assert {name: (tmp_path / name).read_bytes() for name in names} == before
    assert sorted(p.name for p in tmp_path.iterdir()) == sorted(names)


def test_a_missing_file_or_folder_is_named(fixture_upstream_bin: Path, tmp_path: Path) -> None:
    done = run(str(tmp_path), str(fixture_upstream_bin))
    assert done.returncode == 1, done
    assert f"{tmp_path}/wf is missing" in done.stderr
    done = run(str(tmp_path / "nowhere"), str(fixture_upstream_bin))
    assert done.returncode == 1, done
    assert "no folder" in done.stderr and "nowhere" in done.stderr
