#!/usr/bin/env bash
# The TypeScript client's checks and tests, from a fresh clone: builds the
# turnd binary the tests start (bin/turnd), installs the pinned dev
# dependencies (package-lock.json), checks that src/openapi.ts is what
# openapi.yaml generates, and runs the tests (tsc, then node --test against
# a real turnd). Needs Go and Node 20+ with npm.
set -euo pipefail
cd "$(dirname "$0")/../.."

command -v node >/dev/null 2>&1 || { echo "clients/typescript/ci.sh: node is not installed (Node 20+ with npm is needed)" >&2; exit 1; }
major=$(node -p 'process.versions.node.split(".")[0]')
[ "$major" -ge 20 ] || { echo "clients/typescript/ci.sh: Node $major is too old (20+ is needed)" >&2; exit 1; }

echo "== go build -o bin/turnd ./cmd/turnd"
go build -o bin/turnd ./cmd/turnd

cd clients/typescript
echo "== npm ci (clients/typescript)"
npm ci --no-audit --no-fund
echo "== npm run check-types"
npm run --silent check-types
echo "== npm test"
TURND_BIN="$PWD/../../bin/turnd" npm test
