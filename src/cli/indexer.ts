import { DB_FLAGS, configFrom } from './db.ts';
import { createServices, type Services } from '../services.ts';
import { parse } from './args.ts';
import { UsageError } from './usage-error.ts';
import { progressReporter } from './progress.ts';
import { backfillStore, backfillWorkerFor, watchContract, type ChainIndexer } from '../indexer/index.ts';

const USAGE = `usage:
  metarelay indexer backfill --chain NAME|ID --from N [--to M]   create a backfill task and work on it (progress bar)
  metarelay indexer work [--backfill ID]                         join running backfills as one more worker process
  metarelay indexer status ID                                    a backfill's progress, as JSON
  metarelay indexer watch --chain NAME|ID --contract 0x… [--from N]
                                                                 add a contract to a watchlist chain and schedule the backfill
                                                                 of its history (from its deployment block, or N)`;

function indexerOf(s: Services, chain: string | undefined): ChainIndexer {
  if (!chain) throw new UsageError(USAGE);
  const found = s.networks.lookup(chain);
  if (!found.ok) throw new UsageError(found.message);
  const ix = s.indexers.get(found.chain.chainId);
  if (!ix) throw new UsageError(`chain ${found.chain.name} is not indexed: set chains[].indexer in the config`);
  return ix;
}

const block = (v: string | undefined, flag: string): bigint | undefined => {
  if (v === undefined) return undefined;
  if (!/^\d+$/.test(v)) throw new UsageError(`${flag} must be a block number, got "${v}"`);
  return BigInt(v);
};

/** Works a backfill (or every running one) in this process until no range is left, drawing progress. */
async function work(s: Services, backfillId: number | undefined): Promise<void> {
  const store = backfillStore(s.db);
  const bar = backfillId !== undefined ? progressReporter(`backfill #${backfillId}`) : undefined;
  const draw = async () => {
    if (backfillId === undefined || !bar) return;
    const p = await store.progress(backfillId);
    if (p) bar.update(p.done, p.blocks);
  };
  await draw();
  const worker = backfillWorkerFor(s.db, s.indexers, s.config.indexer.leaseSec, draw);
  const finished = await worker.runUntilIdle(backfillId);
  bar?.finish();
  if (backfillId !== undefined) console.log(JSON.stringify({ ...(await store.progress(backfillId)), rangesWorkedHere: finished }));
  else console.log(JSON.stringify({ rangesWorkedHere: finished }));
}

export async function runIndexer(argv: string[]): Promise<void> {
  const [sub, ...rest] = argv;
  const { values, positionals } = parse(rest, {
    ...DB_FLAGS,
    chain: { type: 'string' },
    from: { type: 'string' },
    to: { type: 'string' },
    backfill: { type: 'string' },
    contract: { type: 'string' },
  });
  if (!['backfill', 'work', 'status', 'watch'].includes(sub ?? '')) throw new UsageError(USAGE);
  // What each verb needs, checked before createServices opens (and would create and migrate) a database.
  const missing = sub === 'backfill' ? !values.chain || values.from === undefined : sub === 'watch' ? !values.chain || !values.contract : sub === 'status' ? !positionals[0] : false;
  if (missing) throw new UsageError(USAGE);
  // The indexed chains are the config file's: without it there is nothing to index.
  if (sub !== 'status' && !values.config) throw new UsageError(`indexer ${sub} needs a config: metarelay indexer ${sub} --config metarelay.json …\n${USAGE}`);
  const config = configFrom(values);
  const s = await createServices(config);
  try {
    const store = backfillStore(s.db);
    switch (sub) {
      case 'backfill': {
        const ix = indexerOf(s, values.chain);
        const from = block(values.from, '--from');
        if (from === undefined) throw new UsageError(USAGE);
        const to = block(values.to, '--to') ?? (await ix.chain.head.number()) - BigInt(ix.cfg.confirmations);
        if (to < from) throw new UsageError(`--to ${to} is before --from ${from}`);
        const id = await store.create(ix.chain.chainId, ix.scope, from, to, { rangeBlocks: config.indexer.backfillRangeBlocks });
        console.error(`backfill ${id}: blocks ${from}..${to} of ${ix.chain.name} (${ix.scope}); more workers: metarelay indexer work --backfill ${id}`);
        return await work(s, id);
      }
      case 'work': {
        const id = values.backfill !== undefined ? Number(values.backfill) : undefined;
        if (id !== undefined && !Number.isInteger(id)) throw new UsageError('--backfill must be a backfill id');
        return await work(s, id);
      }
      case 'status': {
        const id = Number(positionals[0]);
        if (!Number.isInteger(id)) throw new UsageError(USAGE);
        const p = await store.progress(id);
        if (!p) throw new UsageError(`no backfill ${id}`);
        console.log(JSON.stringify(p));
        return;
      }
      case 'watch': {
        const ix = indexerOf(s, values.chain);
        if (!values.contract || !/^0x[0-9a-fA-F]{40}$/.test(values.contract)) throw new UsageError('--contract must be a 20-byte 0x address');
        if (ix.scope !== 'watchlist') throw new UsageError(`chain ${ix.chain.name} indexes every contract (scope "${ix.scope}"): no watchlist to add to`);
        const out = await watchContract(ix, values.contract as `0x${string}`, {
          projectId: null,
          fromBlock: block(values.from, '--from'),
          rangeBlocks: config.indexer.backfillRangeBlocks,
        });
        if (out.backfill) console.error(`backfill ${out.backfill.id}: worked by serve/worker in the background, or now: metarelay indexer work --backfill ${out.backfill.id}`);
        console.log(JSON.stringify({ chain: ix.chain.name, ...out, watchlist: await ix.watchlist.list() }));
        return;
      }
    }
  } finally {
    await s.close();
  }
}
