#!/usr/bin/env python3
"""Test reporting for tests/run: per-suite counts, JUnit XML, and the checks that keep
a green run honest (standard library only).

  ci_report.py cargo --manifest M --log L --junit OUT --counts OUT
                     [--package-manifest CARGO_TOML]... [--exclude CRATE]...
      Reads the output of `cargo test` (stdout and stderr, in order) in log L, run in
      the workspace of manifest M. Writes a JUnit report and a counts file. Fails when
      a test failed, or when a crate that has tests (#[test], #[tokio::test]...) ran
      none of them. The crates checked are M's workspace members and every
      --package-manifest (a path dependency tested with -p), minus every --exclude.
  ci_report.py pytest --junit XML --allowlist FILE --counts OUT
      Reads pytest's JUnit report (junit_family=xunit1). Fails when a test failed or
      was skipped without being listed, with its reason, in FILE.
  ci_report.py total [--label L] COUNTS...
      Prints the sum of the counts files: "[L: ]N passed, N failed, N skipped".

Every subcommand prints one summary line, "<suite>: N passed, N failed, N skipped".
"""

from __future__ import annotations

import argparse
import json
import re
import subprocess
import sys
import tomllib
import xml.etree.ElementTree as ET
from dataclasses import dataclass, field
from pathlib import Path

TEST_ATTR = re.compile(r"#\[(?:[\w:]+::)?test\b|#\[rstest\b")
RUNNING = re.compile(r"^\s+Running (?:unittests )?(\S+) \((?:.*/)?([^/)]+)\)\s*$")
DOC_TESTS = re.compile(r"^\s+Doc-tests (\S+)\s*$")
TEST_LINE = re.compile(r"^test (.+?) \.\.\. (ok|FAILED|ignored(?:, .*)?)\s*$")
STDOUT_HEADER = re.compile(r"^---- (.+?) stdout ----$")


@dataclass
class Counts:
    passed: int = 0
    failed: int = 0
    skipped: int = 0

    def line(self) -> str:
        return f"{self.passed} passed, {self.failed} failed, {self.skipped} skipped"


@dataclass
class Case:
    suite: str
    name: str
    outcome: str  # "passed" | "failed" | "skipped"
    message: str = ""


@dataclass
class Binary:
    package: str
    label: str
    doc: bool = False
    cases: list[Case] = field(default_factory=list)


def write_counts(path: Path, counts: Counts) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(counts.__dict__))


def write_junit(path: Path, suites: dict[str, list[Case]]) -> None:
    root = ET.Element("testsuites")
    for suite, cases in suites.items():
        el = ET.SubElement(
            root,
            "testsuite",
            name=suite,
            tests=str(len(cases)),
            failures=str(sum(c.outcome == "failed" for c in cases)),
            skipped=str(sum(c.outcome == "skipped" for c in cases)),
        )
        for c in cases:
            tc = ET.SubElement(el, "testcase", classname=suite, name=c.name)
            if c.outcome == "failed":
                ET.SubElement(tc, "failure", message="failed").text = c.message
            elif c.outcome == "skipped":
                ET.SubElement(tc, "skipped", message=c.message or "ignored")
    path.parent.mkdir(parents=True, exist_ok=True)
    ET.ElementTree(root).write(path, encoding="utf-8", xml_declaration=True)


# --------------------------------------------------------------------------- cargo


def cargo_packages(manifest: Path) -> dict[str, dict]:
    """The members of `manifest`'s workspace by name (as `cargo metadata` describes them)."""
    out = subprocess.run(
        ["cargo", "metadata", "--format-version", "1", "--no-deps", "--manifest-path", str(manifest)],
        check=True,
        capture_output=True,
        text=True,
    ).stdout
    return {p["name"]: p for p in json.loads(out)["packages"]}


def path_package(manifest: Path) -> dict:
    """A path dependency tested with `-p` (not a member): its name and library target."""
    with manifest.open("rb") as f:
        toml = tomllib.load(f)
    name = toml["package"]["name"]
    lib = toml.get("lib", {}).get("name") or name.replace("-", "_")
    return {"name": name, "manifest_path": str(manifest.resolve()), "targets": [{"name": lib}]}


def has_tests(package: dict) -> bool:
    """Whether any Rust file of the package (not of a package nested in it) has a test attribute."""
    root = Path(package["manifest_path"]).parent
    nested = {p.parent for p in root.rglob("Cargo.toml") if p.parent != root}
    for f in root.rglob("*.rs"):
        if "target" in f.relative_to(root).parts or any(n in f.parents for n in nested):
            continue
        if TEST_ATTR.search(f.read_text(errors="replace")):
            return True
    return False


def parse_cargo_log(text: str, target_package: dict[str, str]) -> list[Binary]:
    binaries: list[Binary] = []
    current: Binary | None = None
    output: dict[str, list[str]] = {}
    collecting: list[str] | None = None
    for line in text.splitlines():
        if m := RUNNING.match(line):
            target = re.sub(r"-[0-9a-f]{16}$", "", m.group(2))
            current = Binary(target_package.get(target, target), f"{m.group(1)} ({target})")
            binaries.append(current)
            collecting = None
        elif m := DOC_TESTS.match(line):
            current = Binary(target_package.get(m.group(1), m.group(1)), f"doc-tests ({m.group(1)})", doc=True)
            binaries.append(current)
            collecting = None
        elif current and (m := TEST_LINE.match(line)):
            outcome = {"ok": "passed", "FAILED": "failed"}.get(m.group(2), "skipped")
            current.cases.append(Case(current.label, m.group(1), outcome))
        elif m := STDOUT_HEADER.match(line):
            collecting = output.setdefault(m.group(1), [])
        elif collecting is not None:
            if line in ("failures:", "") and collecting and collecting[-1] == "":
                collecting = None
            else:
                collecting.append(line)
    for b in binaries:
        for c in b.cases:
            if c.outcome == "failed":
                c.message = "\n".join(output.get(c.name, ["(no output captured)"]))
    return binaries


def cmd_cargo(args: argparse.Namespace) -> int:
    packages = cargo_packages(args.manifest)
    for manifest in args.package_manifest:
        extra = path_package(manifest)
        packages[extra["name"]] = extra
    checked = packages.keys() - set(args.exclude)
    target_package = {
        t["name"].replace("-", "_"): name for name, p in packages.items() for t in p["targets"]
    }
    binaries = parse_cargo_log(args.log.read_text(errors="replace"), target_package)

    counts = Counts()
    suites: dict[str, list[Case]] = {}
    ran: dict[str, int] = {}
    for b in binaries:
        suites.setdefault(f"{b.package}: {b.label}", []).extend(b.cases)
        for c in b.cases:
            setattr(counts, c.outcome, getattr(counts, c.outcome) + 1)
            if c.outcome != "skipped" and not b.doc:  # doc-tests are not the #[test]s
                ran[b.package] = ran.get(b.package, 0) + 1
    write_junit(args.junit, suites)
    write_counts(args.counts, counts)

    problems = [
        f"crate {name} has tests, but cargo test ran none of them"
        for name in sorted(checked)
        if name in packages and ran.get(name, 0) == 0 and has_tests(packages[name])
    ]
    problems += [f"--exclude {name}: no such crate" for name in sorted(set(args.exclude) - packages.keys())]
    print(f"{args.suite}: {counts.line()}")
    for p in problems:
        print(f"error: {p}", file=sys.stderr)
    return 1 if problems or counts.failed else 0


# --------------------------------------------------------------------------- pytest


def id_matches(node: str, pattern: str) -> bool:
    """`pattern` is a node id in which only `*` is a wildcard (ids have brackets)."""
    return re.fullmatch(".*".join(map(re.escape, pattern.split("*"))), node) is not None


def read_allowlist(path: Path) -> tuple[dict[str, str], list[str]]:
    """`<node id> | <reason>` per line (`*` in the id matches anything); `#` starts a comment line."""
    allowed: dict[str, str] = {}
    problems: list[str] = []
    for n, raw in enumerate(path.read_text().splitlines(), 1):
        line = raw.strip()
        if not line or line.startswith("#"):
            continue
        pattern, sep, reason = (s.strip() for s in line.partition("|"))
        if not sep or not pattern or not reason:
            problems.append(f"{path}:{n}: expected `<test id> | <reason>`, got {raw!r}")
        else:
            allowed[pattern] = reason
    return allowed, problems


def cmd_pytest(args: argparse.Namespace) -> int:
    counts = Counts()
    skipped: list[tuple[str, str]] = []
    if not args.junit.exists():
        print(f"{args.suite}: no report ({args.junit} missing)")
        write_counts(args.counts, Counts(failed=1))
        return 1
    for tc in ET.parse(args.junit).getroot().iter("testcase"):
        file = tc.get("file") or ""
        module = Path(file).stem
        classes = [c for c in (tc.get("classname") or "").split(".") if c][len(Path(file).with_suffix("").parts) :]
        node = "::".join([file or module, *classes, tc.get("name") or "?"])
        if tc.find("failure") is not None or tc.find("error") is not None:
            counts.failed += 1
        elif (s := tc.find("skipped")) is not None:
            counts.skipped += 1
            skipped.append((node, s.get("message") or ""))
        else:
            counts.passed += 1
    write_counts(args.counts, counts)

    allowed, problems = read_allowlist(args.allowlist)
    unlisted = [(n, why) for n, why in skipped if not any(id_matches(n, p) for p in allowed)]
    print(f"{args.suite}: {counts.line()}")
    for n, why in unlisted:
        problems.append(f"skipped, and not in {args.allowlist.name}: {n} ({why})")
    for p in problems:
        print(f"error: {p}", file=sys.stderr)
    return 1 if problems or counts.failed else 0


def cmd_total(args: argparse.Namespace) -> int:
    total = Counts()
    for path in args.paths:
        c = json.loads(path.read_text()) if path.exists() else {"failed": 1}
        for k in ("passed", "failed", "skipped"):
            setattr(total, k, getattr(total, k) + c.get(k, 0))
    print(f"{args.label}: {total.line()}" if args.label else total.line())
    return 0


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = ap.add_subparsers(dest="cmd", required=True)
    c = sub.add_parser("cargo")
    c.add_argument("--suite", default="Rust")
    c.add_argument("--manifest", type=Path, required=True)
    c.add_argument("--log", type=Path, required=True)
    c.add_argument("--junit", type=Path, required=True)
    c.add_argument("--counts", type=Path, required=True)
    c.add_argument("--package-manifest", type=Path, action="append", default=[])
    c.add_argument("--exclude", action="append", default=[])
    p = sub.add_parser("pytest")
    p.add_argument("--suite", default="e2e")
    p.add_argument("--junit", type=Path, required=True)
    p.add_argument("--allowlist", type=Path, required=True)
    p.add_argument("--counts", type=Path, required=True)
    t = sub.add_parser("total")
    t.add_argument("--label", default="")
    t.add_argument("paths", type=Path, nargs="+")
    args = ap.parse_args()
    return {"cargo": cmd_cargo, "pytest": cmd_pytest, "total": cmd_total}[args.cmd](args)


if __name__ == "__main__":
    sys.exit(main())
