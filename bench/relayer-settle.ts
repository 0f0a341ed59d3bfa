// The status write that settles a dispatch pass's mined sponsored meta-transactions, alone: each has a
// sponsorship charge (settled to its actual cost on its rule's, day's and wallets' counters,
// spend-caps.ts) and a project with a gas tank (debited, debits.ts). Measured: the wall time of that
// transaction (what it holds the sponsorship rules' and the tank's row locks for, and on PGlite the one
// connection), its statements, on PGlite and PostgreSQL in one run.
//
//   npx tsx bench/relayer-settle.ts          # BENCH_BACKENDS=pglite,postgres BENCH_BATCH=50 BENCH_ROUNDS=20
//
// Setup, not measured: a project with a tank and one sponsorship rule; per round BENCH_BATCH charges
// written as intake writes them (one transaction each, the charge with the COMMIT). Result JSON on stdout.
import type { Address } from 'viem';
import { balanceDebits } from '../src/relayer/balances/debits.ts';
import { spendCaps } from '../src/relayer/intake/spend-caps.ts';
import type { MetaTxnRow } from '../src/relayer/store.ts';
import type { Db, QueryResult, Tx } from '../src/store/db.ts';
import { benchDb, log, summarize } from './support.ts';

const BATCH = Number(process.env.BENCH_BATCH ?? 50);
const ROUNDS = Number(process.env.BENCH_ROUNDS ?? 20);
const backends = (process.env.BENCH_BACKENDS ?? 'pglite,postgres').split(',') as ('pglite' | 'postgres')[];
const CHAIN = 31337;

/** Counts the statements a transaction sends. */
function counting(db: Db): { db: Db; statements: () => number } {
  let n = 0;
  const wrap = (tx: Tx): Tx => ({
    ...tx,
    query: <T>(sql: string, params?: unknown[]): Promise<QueryResult<T>> => {
      n++;
      return tx.query<T>(sql, params);
    },
    atCommit: tx.atCommit,
  });
  return { db: { ...db, transaction: (fn) => db.transaction((tx) => fn(wrap(tx))) }, statements: () => n };
}

const out: Record<string, unknown> = { bench: 'relayer-settle', batch: BATCH, rounds: ROUNDS };
for (const backend of backends) {
  const { db, drop } = await benchDb(backend);
  try {
    const project = Number((await db.query<{ id: string }>(`INSERT INTO projects (name) VALUES ('settle-bench') RETURNING id`)).rows[0]!.id);
    const rule = Number((await db.query<{ id: string }>(`INSERT INTO gas_sponsors (project_id, chain_id, kind, address) VALUES ($1, $2, 'ANY', 'any') RETURNING id`, [project, CHAIN])).rows[0]!.id);
    await db.query(`INSERT INTO gas_tanks (chain_id, project_id, balance_wei) VALUES ($1, $2, $3)`, [CHAIN, project, (10n ** 24n).toString()]);
    const caps = spendCaps(db);
    const debit = balanceDebits();
    const walls: number[] = [];
    const perStatements: number[] = [];
    for (let round = 0; round < ROUNDS + 2; round++) {
      const rows = Array.from({ length: BATCH }, (_, i) => {
        const id = `${round.toString(16).padStart(8, '0')}${i.toString(16).padStart(56, '0')}`;
        const wallet = `0x${(i % 10).toString(16).padStart(40, 'a')}` as Address;
        return { id, wallet };
      });
      for (const r of rows) {
        await db.transaction(async (tx) => {
          caps.charge(tx, { chainId: CHAIN, metaTxnId: r.id, ruleIds: [rule], wallets: [r.wallet], cost: { wei: 10n ** 15n, usd: 2n * 10n ** 15n } });
        });
      }
      // Mined, each at a cost below its estimate, the whole pass in one status write.
      const mined = rows.map(
        (r, i) =>
          ({
            chain_id: CHAIN,
            id: r.id,
            status: 'SUCCEEDED',
            sponsored: true,
            project_id: project,
            gas_used: 50_000 + i,
            gas_price: '1000000000',
            l1_fee_wei: null,
            txn_hash: `0x${r.id}`,
          }) as unknown as MetaTxnRow,
      );
      const c = counting(db);
      const t0 = performance.now();
      await c.db.transaction(async (tx) => {
        await caps.onStatus(tx, mined);
        await debit(tx, mined, { before: 'SENT' });
      });
      // The first two rounds warm the statements up.
      if (round >= 2) {
        walls.push(performance.now() - t0);
        perStatements.push(c.statements());
      }
    }
    out[backend] = { transactionMs: summarize(walls), statements: perStatements[0] };
    log(`${backend}: ${JSON.stringify(out[backend])}`);
  } finally {
    await drop();
  }
}
console.log(JSON.stringify(out, null, 2));
