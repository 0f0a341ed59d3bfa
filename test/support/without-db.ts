/**
 * Test files that open no database of the run's kind: the CLI's usage and refusals (which must open none,
 * and whose one list check has a PGlite folder of its own), the shutdown handler's signal order, PGlite's
 * own folder lock, and units of config, chain access, codecs and errors. In the PostgreSQL half of
 * `npm test` they would run the same processes and checks a second time for nothing, so they run once, in
 * the PGlite half (the default of `npx vitest run`). createTestDb refuses to serve one of them, so a file
 * that starts taking the run's database from it (directly or through startTestService, startRelayerEnv
 * and the like) fails at once instead of running on PGlite alone unnoticed.
 */
export const WITHOUT_THE_RUNS_DATABASE = [
  'test/ask-again.test.ts',
  'test/call-budget.test.ts',
  'test/chain-head.test.ts',
  'test/cli-usage.test.ts',
  'test/config-secrets.test.ts',
  'test/config.test.ts',
  'test/cost-shares.test.ts',
  'test/db-maintenance-report.test.ts',
  'test/devchain.test.ts',
  'test/docs-figures.test.ts',
  'test/error-base.test.ts',
  'test/errors.test.ts',
  'test/example-config.test.ts',
  'test/layering.test.ts',
  'test/limiter.test.ts',
  'test/loop-outages.test.ts',
  'test/metadata-fetch.test.ts',
  'test/metadata-uri.test.ts',
  'test/multicall.test.ts',
  'test/networks.test.ts',
  'test/pglite-lock.test.ts',
  'test/relayer-engine-units.test.ts',
  'test/relayer-finality.test.ts',
  'test/relayer-probe-proxy.test.ts',
  'test/relayer-receipts.test.ts',
  'test/rpc-proxy.test.ts',
  'test/sequence-wallet.test.ts',
  'test/shutdown-order.test.ts',
  'test/stream-slots.test.ts',
];

/**
 * Test files that bring their own PostgreSQL and need no PGlite counterpart: `pg-faults` starts a private
 * cluster (support/private-postgres.ts) to restart it, end its backends and fill its slots, which the
 * shared server must not suffer and PGlite (one connection, in process) has no equivalent of. They run
 * in the PostgreSQL half only, where the server's binaries are known to be installed. `fleet-leader`,
 * `fleet-dispatch` and `fleet-rates` run three processes on one database, which PGlite (one process per database) does not allow; `sponsor-spend-shards`
 * and `claims-skip-locked` several pools on one database.
 */
export const ONLY_WITH_POSTGRES = [
  'test/pg-faults.test.ts',
  'test/fleet-leader.test.ts',
  'test/fleet-dispatch.test.ts',
  'test/fleet-rates.test.ts',
  'test/sponsor-spend-shards.test.ts',
  'test/claims-skip-locked.test.ts',
  'test/sponsor-shard-held.test.ts',
];
