#!/usr/bin/env bash
# Compares two turnd binaries head to head under workload 1 (4 instant
# reads, 32 closed-loop clients): both serve at the same time, each on a
# fresh database of one PostgreSQL, each loaded by a `turnd bench` of its
# own, so that both see the same machine at every moment. On a shared
# machine whose speed drifts by a third between runs a minute apart, runs
# that alternate the binaries cannot show a change of a few percent; runs
# side by side come closer: two copies of one binary gave 0.979–1.063 per
# run, 1.014 on average over ten. Take eight runs or more, and read the
# CPU per turn beside the rate.
#
#   scripts/bench-ab.sh OLD NEW [RUNS] [SECONDS]
#   WORKLOAD=2 scripts/bench-ab.sh OLD NEW [RUNS] [SECONDS]
#   WORKLOAD=4 scripts/bench-ab.sh OLD NEW [RUNS] [SECONDS]
#   WORKLOAD=c [PARKED=2000] scripts/bench-ab.sh OLD NEW [RUNS]
#
# WORKLOAD=2 runs workload 2 instead (half reads, half writes, the bench's
# loopback HTTP tools taking 1-20 ms): each bench serves the tools of its
# own server, on a port of its own. WORKLOAD=4 runs workload 4, the
# completion workload (a quarter of the calls park on a completion key,
# which the bench's tool completes after an exponential delay of mean
# 20 ms), on the bench's tools likewise. WORKLOAD=c runs the completion
# workload (`turnd bench --completions`: PARKED calls parked, then
# delivered from 32 clients) instead of a window of SECONDS; the rates are
# completions/s, and the CPU per completion counts the parking too.
#
# Prints, per run, each server's turns/s and its CPU time per turn (from
# /proc, Linux), and the ratio NEW/OLD; then the mean ratio. Each server
# gets half the machine, so the absolute figures are not workload 1's:
# read the ratios. Uses DATABASE_URL when set, else a throwaway cluster
# (scripts/pg.sh). The bench is NEW's.
set -euo pipefail

old=${1:?usage: scripts/bench-ab.sh OLD NEW [RUNS] [SECONDS]}
new=${2:?usage: scripts/bench-ab.sh OLD NEW [RUNS] [SECONDS]}
runs=${3:-5}
secs=${4:-4}
here=$(cd "$(dirname "$0")" && pwd)
old=$(realpath "$old")
new=$(realpath "$new")

work=$(mktemp -d -t turnd-ab.XXXXXX)
pids=()
cleanup() {
  for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done
  for p in "${pids[@]}"; do wait "$p" 2>/dev/null || true; done
  [ -n "${started_pg:-}" ] && pg_stop
  rm -rf "$work"
}
trap cleanup EXIT

. "$here/pg.sh"
if [ -z "${DATABASE_URL:-}" ]; then
  pg_start >/dev/null
  started_pg=1
fi
psql_bin=psql
command -v psql >/dev/null 2>&1 || psql_bin="$(pg_bindir)/psql"

workload=${WORKLOAD:-1}
case $workload in 1 | 2 | 4 | c) ;; *) echo "bench-ab: WORKLOAD must be 1, 2, 4 or c" >&2; exit 2 ;; esac
parked=${PARKED:-2000}
ticks=$(getconf CLK_TCK)

declare -a port toolport
for i in 0 1; do
  bin=$old
  [ "$i" = 1 ] && bin=$new
  db="turnd_ab_${i}_$$"
  "$psql_bin" "$DATABASE_URL" -qc "CREATE DATABASE $db TEMPLATE template0"
  url=$(printf '%s' "$DATABASE_URL" | sed -E "s#^(postgres(ql)?://[^/]*)/[^?]*#\1/$db#")
  case $url in
  */$db | */$db\?*) ;;
  *) echo "bench-ab: DATABASE_URL must be a postgres:// URL with a database path" >&2; exit 1 ;;
  esac
  port[$i]=$(pg_free_port)
  if [ "$workload" != 1 ]; then
    toolport[$i]=$(pg_free_port)
    "$new" bench --print-tool-config --tool-addr "127.0.0.1:${toolport[$i]}" >"$work/tools-$i.yaml"
  else
    printf 'builtin: [echo, sleep, now]\ntools: []\n' >"$work/tools-$i.yaml"
  fi
  DATABASE_URL=$url TURND_ADDR=127.0.0.1:${port[$i]} TURND_CONFIG=$work/tools-$i.yaml \
    TURND_LOG_FORMAT=json TURND_LOG_LEVEL=warn "$bin" serve >"$work/serve-$i.log" 2>&1 &
  pids[$i]=$!
  for _ in $(seq 1 100); do
    curl -sf "http://127.0.0.1:${port[$i]}/readyz" >/dev/null 2>&1 && break
    kill -0 "${pids[$i]}" 2>/dev/null || { cat "$work/serve-$i.log" >&2; exit 1; }
    sleep 0.1
  done
done

cpu() { awk '{print $14 + $15}' "/proc/$1/stat"; }
load() { # load SERVER SECONDS OUT
  local tools=(--tools builtin)
  [ "$workload" = 2 ] && tools=(--tools http --tool-addr "127.0.0.1:${toolport[$1]}" --read-fraction 0.5 --latency uniform:1ms-20ms)
  [ "$workload" = 4 ] && tools=(--tools http --tool-addr "127.0.0.1:${toolport[$1]}" --deferred-fraction 0.25 --deferred-delay exp:20ms)
  if [ "$workload" = c ]; then
    # A warm-up (2 s) parks a tenth.
    local n=$parked
    [ "$2" = 2 ] && n=$((parked / 10))
    "$new" bench --url "http://127.0.0.1:${port[$1]}" --tools http --tool-addr "127.0.0.1:${toolport[$1]}" \
      --completions --parked "$n" --concurrency 32 --wait 10m --baseline 0s --progress none --json >"$3" 2>/dev/null
    return
  fi
  "$new" bench --url "http://127.0.0.1:${port[$1]}" "${tools[@]}" --concurrency 32 --calls 4 \
    --duration "${2}s" --baseline 0s --progress none --json >"$3" 2>/dev/null
}
# Warm both up (connections, prepared statements, the tables' first pages).
load 0 2 "$work/warm-0.json" &
wa=$!
load 1 2 "$work/warm-1.json" &
wait "$wa" $!

ratios=()
for r in $(seq 1 "$runs"); do
  a0=$(cpu "${pids[0]}")
  b0=$(cpu "${pids[1]}")
  # The two loads start in turn first, so that neither binary gains
  # from its bench's head start.
  if [ $((r % 2)) = 1 ]; then
    load 0 "$secs" "$work/a.json" &
    la=$!
    load 1 "$secs" "$work/b.json" &
    lb=$!
  else
    load 1 "$secs" "$work/b.json" &
    lb=$!
    load 0 "$secs" "$work/a.json" &
    la=$!
  fi
  wait "$la" "$lb"
  a1=$(cpu "${pids[0]}")
  b1=$(cpu "${pids[1]}")
  line=$(python3 - "$work/a.json" "$work/b.json" "$((a1 - a0))" "$((b1 - b0))" "$ticks" <<'EOF'
import json, sys
a, b = (json.load(open(p))["turns"] for p in sys.argv[1:3])
da, db, tick = int(sys.argv[3]), int(sys.argv[4]), int(sys.argv[5])
us = lambda d, t: d * 1e6 / tick / max(1, t["ok"])
print("%.4f old %.1f turns/s %.1f µs/turn | new %.1f turns/s %.1f µs/turn | new/old %.3f | failed %d %d" % (
    b["per_sec"] / a["per_sec"], a["per_sec"], us(da, a), b["per_sec"], us(db, b),
    b["per_sec"] / a["per_sec"], a["failed"], b["failed"]))
EOF
)
  ratios+=("${line%% *}")
  echo "run $r: ${line#* }"
done
printf '%s\n' "${ratios[@]}" | awk '{s += $1; n++; if ($1 > 1) w++} END {printf "mean new/old %.3f over %d runs, new ahead in %d\n", s / n, n, w}'
