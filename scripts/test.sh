#!/usr/bin/env bash
# Runs every check and test of turnd from a fresh clone:
#   gofmt, go vet, go mod tidy drift, then go test -race over all packages.
# As root with apt-get it installs promtool (Debian's prometheus package) when
# it is missing; the deploy and metrics tests use it.
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
# output. Installed here when missing and possible; otherwise the tests that
# need it skip, saying why.
ensure_promtool() {
  command -v promtool >/dev/null 2>&1 && return 0
  if [ "$(id -u)" != 0 ]; then
    echo "test.sh: promtool is missing and this is not root: the promtool checks will be skipped"
    return 0
  fi
  if ! command -v apt-get >/dev/null 2>&1; then
    echo "test.sh: promtool is missing and there is no apt-get: the promtool checks will be skipped"
    return 0
  fi
  echo "== installing promtool (Debian package prometheus)"
  # The package only brings promtool here: keep its service from starting
  # where nothing else prevents it.
  local policy=""
  if [ ! -e /usr/sbin/policy-rc.d ]; then
    policy=/usr/sbin/policy-rc.d
    printf '#!/bin/sh\nexit 101\n' >"$policy" && chmod +x "$policy"
  fi
  local log rc=0
  log=$(mktemp)
  export DEBIAN_FRONTEND=noninteractive
  if ! apt-get install -y -qq --no-install-recommends prometheus >"$log" 2>&1; then
    # The package lists may be missing or stale.
    { apt-get update -qq && apt-get install -y -qq --no-install-recommends prometheus; } >"$log" 2>&1 || rc=$?
  fi
  [ -z "$policy" ] || rm -f "$policy"
  if [ "$rc" != 0 ] || ! command -v promtool >/dev/null 2>&1; then
    echo "test.sh: could not install the prometheus package (exit $rc): the promtool checks will be skipped"
    tail -n 5 "$log" | sed 's/^/  /'
  fi
  rm -f "$log"
  return 0
}
ensure_promtool

if [ -z "${DATABASE_URL:-}" ]; then
  echo "== throwaway PostgreSQL"
  # shellcheck source=scripts/pg.sh
  . scripts/pg.sh
  pg_start
  trap pg_stop EXIT
fi

echo "== go test -race"
go test -race -count=1 -timeout 20m "$@" ./...
