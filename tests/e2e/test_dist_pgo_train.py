"""dist/pgo-train, the training run of dist/build's profile-guided build
(docs/distribution.md, "Profile-guided optimisation").

A release build is not made here (it takes the better part of an hour); the
training script itself runs against the test build, so that a change to the
CLI, the workflow example or the drive scripts it uses breaks this test, not
the next release.
"""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

from conftest import REPO


def test_the_training_run_exercises_both_fronts_and_exits_cleanly(wf_bin: Path, fixture_upstream_bin: Path) -> None:
    env = {**os.environ, "WF_PGO_SECONDS": "1"}
    done = subprocess.run(
        [str(REPO / "dist" / "pgo-train"), str(wf_bin), str(fixture_upstream_bin)],
        cwd=REPO,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode == 0, f"dist/pgo-train failed:\n{done.stdout}\n{done.stderr}"
    out = done.stdout
    for step in ("training: the CLI", "over stdio", "over streamable HTTP", "training done"):
        assert step in out, f"{step!r} missing from:\n{out}"
    # Every call phase made calls: the drive scripts print "calls N in …" and
    # fail on a wrong reply, so three counts above zero mean three fronts served.
    counts = [int(line.split()[1]) for line in out.splitlines() if line.startswith("calls ")]
    assert len(counts) == 3 and all(n > 0 for n in counts), out
    # The workflow ran to its end (wf run prints the outputs on stdout, sent to
    # /dev/null by the script; its progress lines reach stderr).
    assert "succeeded" in done.stderr, done.stderr


def test_it_refuses_a_wrong_call() -> None:
    done = subprocess.run([str(REPO / "dist" / "pgo-train")], cwd=REPO, capture_output=True, text=True, timeout=30)
    assert done.returncode == 2
    assert "usage: dist/pgo-train WF FIXTURE" in done.stderr
