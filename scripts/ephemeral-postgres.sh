#!/usr/bin/env bash
# Starts a throw-away PostgreSQL cluster that listens on a Unix socket only and
# exports DATABASE_URL for it. Meant to be sourced:
#
#     source scripts/ephemeral-postgres.sh   # sets DATABASE_URL, EPHEMERAL_PG_DIR
#
# The cluster is stopped and deleted when the sourcing shell exits. As root the
# server runs as the unprivileged `postgres` account, because initdb and the
# server both refuse to run as root. fsync is off: this is for tests only.
set -euo pipefail

pg_bin_dir=${PG_BIN:-}
if [ -z "$pg_bin_dir" ]; then
  pg_bin_dir=$(ls -d /usr/lib/postgresql/*/bin 2>/dev/null | sort -V | tail -n 1 || true)
fi
if [ -z "$pg_bin_dir" ] || [ ! -x "$pg_bin_dir/initdb" ]; then
  echo "ephemeral-postgres: no PostgreSQL server binaries found (install the postgresql package)" >&2
  return 1 2>/dev/null || exit 1
fi

EPHEMERAL_PG_DIR=$(mktemp -d /tmp/afpg.XXXXXX)
chmod 755 "$EPHEMERAL_PG_DIR"
run_as=()
if [ "$(id -u)" = 0 ]; then
  id -u postgres >/dev/null 2>&1 || useradd --system --no-create-home --shell /usr/sbin/nologin postgres
  chown postgres "$EPHEMERAL_PG_DIR"
  run_as=(runuser -u postgres --)
fi

"${run_as[@]}" "$pg_bin_dir/initdb" -D "$EPHEMERAL_PG_DIR/data" -U postgres --auth=trust \
  -E UTF8 --locale=C.UTF-8 --no-sync >"$EPHEMERAL_PG_DIR/initdb.log" 2>&1
# `-l` matters: without a log file pg_ctl's output pipe never closes.
"${run_as[@]}" "$pg_bin_dir/pg_ctl" -D "$EPHEMERAL_PG_DIR/data" -l "$EPHEMERAL_PG_DIR/server.log" -w -t 30 \
  -o "-c listen_addresses='' -k $EPHEMERAL_PG_DIR -c fsync=off -c synchronous_commit=off -c full_page_writes=off -c max_connections=300" \
  start >/dev/null

export EPHEMERAL_PG_DIR
export DATABASE_URL="postgres://postgres@localhost/postgres?host=$EPHEMERAL_PG_DIR"

ephemeral_pg_stop() {
  "${run_as[@]}" "$pg_bin_dir/pg_ctl" -D "$EPHEMERAL_PG_DIR/data" -m immediate -w stop >/dev/null 2>&1 || true
  rm -rf "$EPHEMERAL_PG_DIR"
}
trap ephemeral_pg_stop EXIT
