#!/bin/bash
# What each statement costs PostgreSQL during bench/relayer-intake.ts: pg_stat_statements is reset once
# the bench's warm-up is done and read once its phase B is final (docs/performance-log.md, "Statistics kept
# as the tables grow"). Needs the extension loaded by the server, once:
#   shared_preload_libraries = 'pg_stat_statements' and pg_stat_statements.track_planning = on in
#   postgresql.conf, a restart, then CREATE EXTENSION pg_stat_statements in the admin database.
# Usage: bash bench/pg-statements.sh [label]   (writes /tmp/pg-statements-<label>.{log,txt})
# Extra bench settings pass through the environment (BENCH_WALLETS, BENCH_CONCURRENCY, ...).
set -euo pipefail
label=${1:-run}
admin=${METARELAY_TEST_PG_URL:-postgres://postgres@127.0.0.1:5432/postgres}
log=/tmp/pg-statements-$label.log
out=/tmp/pg-statements-$label.txt
cd "$(dirname "$0")/.."
METARELAY_TEST_DB=postgres BENCH_WALLETS=${BENCH_WALLETS:-250} BENCH_CONCURRENCY=${BENCH_CONCURRENCY:-64} BENCH_TRANSPORTS=http \
  npx tsx bench/relayer-intake.ts > "$log" 2>&1 &
pid=$!
until grep -q "warm-up done" "$log"; do kill -0 $pid 2>/dev/null || { tail "$log"; exit 1; }; sleep 0.2; done
psql "$admin" -Atqc "SELECT pg_stat_statements_reset()"
until grep -q "phase B: final" "$log"; do kill -0 $pid 2>/dev/null || { tail "$log"; exit 1; }; sleep 0.2; done
# The run's own database only (the bench makes one per run), heaviest first; per_send_ms over 1 000 sends.
psql "$admin" -P pager=off -c "
SELECT calls, round(total_plan_time::numeric) AS plan_ms, round(total_exec_time::numeric) AS exec_ms,
  round((total_plan_time + total_exec_time)::numeric / 1000, 2) AS per_send_ms, shared_blks_hit / greatest(calls, 1) AS buffers_per_call,
  left(regexp_replace(query, '\s+', ' ', 'g'), 140) AS statement
FROM pg_stat_statements s JOIN pg_database d ON d.oid = s.dbid WHERE d.datname LIKE 'metarelay_%'
ORDER BY total_plan_time + total_exec_time DESC LIMIT 40" > "$out"
wait $pid
cat "$out"
