#!/usr/bin/env bash
# Runs every check and test of turnd from a fresh clone:
#   gofmt, go vet, go mod tidy drift, then go test -race over all packages.
# It installs nothing on the machine (.ci/run does): it needs Go, the
# PostgreSQL server binaries, and optionally promtool.
# When DATABASE_URL is not set it starts a throwaway PostgreSQL cluster
# (initdb into a temp dir, a free loopback port) and removes it afterwards.
set -euo pipefail
cd "$(dirname "$0")/.."

fail() { echo "test.sh: $*" >&2; exit 1; }

echo "== gofmt"
unformatted=$(gofmt -l $(git ls-files '*.go' 2>/dev/null || find . -name '*.go'))
[ -z "$unformatted" ] || fail "unformatted files (run gofmt -w):
$unformatted"

echo "== go mod tidy (drift)"
go mod tidy -diff || fail "go.mod/go.sum drift: run go mod tidy"

echo "== go vet"
go vet ./...

# promtool (in Debian's prometheus package) checks the Prometheus config, the
# alert rules and the dashboard queries under deploy/, and the /metrics
# output. This script installs nothing: .ci/run installs it; without it the
# tests that need it skip, saying why.
command -v promtool >/dev/null 2>&1 ||
  echo "test.sh: promtool is missing (Debian package prometheus): the promtool checks will be skipped"

if [ -z "${DATABASE_URL:-}" ]; then
  echo "== throwaway PostgreSQL"
  # shellcheck source=scripts/pg.sh
  . scripts/pg.sh
  pg_start
  trap pg_stop EXIT
fi

echo "== go test -race"
go test -race -count=1 -timeout 20m "$@" ./...
