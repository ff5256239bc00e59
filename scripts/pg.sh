# Sourced by scripts: pg_start creates a throwaway PostgreSQL cluster in a
# temp dir on a free loopback port and exports DATABASE_URL; pg_stop removes it.
# As root the cluster runs as the `postgres` user (initdb refuses root).

pg_bindir() {
  if command -v pg_ctl >/dev/null 2>&1; then dirname "$(command -v pg_ctl)"; return; fi
  local d
  for d in $(ls -d /usr/lib/postgresql/*/bin 2>/dev/null | sort -V -r); do
    [ -x "$d/pg_ctl" ] && { echo "$d"; return; }
  done
  return 1
}

# pg_free_port prints a loopback port nothing listens on, below the
# kernel's ephemeral range when it can (a port in that range may be the
# local end of some connection, which a listener cannot bind).
pg_free_port() {
  local lo=20000 span=40000 low port
  low=$(awk '{print $1}' /proc/sys/net/ipv4/ip_local_port_range 2>/dev/null)
  if [ -n "$low" ] && [ "$low" -gt 12000 ]; then lo=10000; span=$((low - 10000)); fi
  for _ in $(seq 1 200); do
    port=$(( lo + RANDOM % span ))
    if ! (exec 3<>"/dev/tcp/127.0.0.1/$port") 2>/dev/null; then echo "$port"; return; fi
  done
  return 1
}

pg_as() {
  if [ "$(id -u)" = 0 ]; then runuser -u postgres -- "$@"; else "$@"; fi
}

pg_start() {
  local bin port attempt
  bin=$(pg_bindir) || { echo "pg.sh: PostgreSQL server binaries not found (install postgresql)" >&2; return 1; }
  PG_TMP=$(mktemp -d -t turnd-pg.XXXXXX)
  chmod 755 "$PG_TMP"
  [ "$(id -u)" = 0 ] && chown postgres "$PG_TMP"
  pg_as "$bin/initdb" -D "$PG_TMP/data" -A trust -U turnd -E UTF8 --no-locale >"$PG_TMP/initdb.log" 2>&1 ||
    { cat "$PG_TMP/initdb.log" >&2; return 1; }
  # The port was free a moment ago; another process may take it before the
  # server binds it, so a start that cannot bind is tried on another.
  for attempt in 1 2 3 4 5; do
    port=$(pg_free_port) || { echo "pg.sh: no free port" >&2; return 1; }
    rm -f "$PG_TMP/server.log"
    if pg_as "$bin/pg_ctl" -D "$PG_TMP/data" -l "$PG_TMP/server.log" -w -t 60 start \
      -o "-c listen_addresses=127.0.0.1 -p $port -k $PG_TMP -c max_connections=300 -c shared_buffers=128MB" >/dev/null; then
      break
    fi
    if [ "$attempt" = 5 ] || ! grep -q "Address already in use" "$PG_TMP/server.log" 2>/dev/null; then
      cat "$PG_TMP/server.log" >&2
      return 1
    fi
  done
  PG_BIN=$bin
  export DATABASE_URL="postgres://turnd@127.0.0.1:$port/postgres?sslmode=disable"
  echo "PostgreSQL on 127.0.0.1:$port"
}

pg_stop() {
  [ -n "${PG_TMP:-}" ] || return 0
  pg_as "$PG_BIN/pg_ctl" -D "$PG_TMP/data" -m immediate -w stop >/dev/null 2>&1 || true
  rm -rf "$PG_TMP"
  PG_TMP=
}
