import type { Address } from 'viem';
import { DB_FLAGS, configFrom } from './db.ts';
import { createServices } from '../services.ts';
import { parse } from './args.ts';
import { UsageError } from './usage-error.ts';
import { progressReporter } from './progress.ts';
import { onShutdown } from './shutdown.ts';
import { parseTokenId } from '../metadata/tokens/token-id.ts';

/** `metarelay worker`: the refresh worker and chain watchers, without HTTP. Run as many as you like. */
export async function runWorker(argv: string[]) {
  const { values } = parse(argv, DB_FLAGS);
  // Without a file there are no chains to watch: refused before a database is opened (and created).
  if (!values.config) throw new UsageError('worker needs a config: metarelay worker --config metarelay.json (the same file serve runs with)');
  const config = configFrom(values);
  const s = await createServices(config);
  s.startBackground();
  s.log.info({ owner: s.worker.owner, chains: config.chains.map((c) => c.name) }, 'refresh worker started');
  onShutdown(s.log, { drain: () => s.drain(), close: () => s.close(), deadlineMs: config.shutdown.deadlineMs });
}

/** `metarelay refresh --chain X --contract Y [--tokens 1,2,3 | --all]`: enqueue, then follow to the end. */
export async function runRefresh(argv: string[]) {
  const { values } = parse(argv, {
    ...DB_FLAGS,
    chain: { type: 'string' },
    contract: { type: 'string' },
    tokens: { type: 'string' },
    all: { type: 'boolean' },
  });
  if (!values.chain || !values.contract || (!values.tokens && !values.all)) {
    throw new UsageError('usage: metarelay refresh --chain NAME|ID --contract 0x… (--tokens 1,2,3 | --all)');
  }
  if (!/^0x[0-9a-fA-F]{40}$/.test(values.contract)) throw new UsageError('--contract must be a 20-byte 0x address');
  const ids = (values.tokens ?? '')
    .split(',')
    .map((t) => t.trim())
    .filter(Boolean)
    .map((t) => {
      const id = parseTokenId(t);
      if (id === null) throw new UsageError(`--tokens: "${t}" is not a token id`);
      return id;
    });
  const config = configFrom(values);
  const s = await createServices(config);
  try {
    const found = s.networks.lookup(values.chain);
    if (!found.ok) throw new UsageError(found.message);
    const chain = s.chains.get(found.chain.chainId)!;
    const contract = values.contract.toLowerCase() as Address;
    const { taskId, joined } = values.all ? await s.refresh.enqueueAllTokens(null, chain, contract, { source: 'cli' }) : await s.refresh.enqueueTokens(null, chain, contract, ids, { source: 'cli' });
    console.error(`task ${taskId}${joined ? ' (joined work already queued)' : ''}`);
    // This process works the queue too, so the task finishes even when no other worker runs.
    s.startBackground();
    const bar = progressReporter(`refresh #${taskId}`);
    for (;;) {
      const t = (await s.tasks.get(taskId))!;
      bar.update(t.succeeded + t.failed, t.enumerated ? t.total : Math.max(t.total, t.succeeded + t.failed + 1));
      if (t.status !== 'QUEUED') {
        bar.finish();
        const r = await s.refresh.result(null, taskId);
        console.log(JSON.stringify({ taskId, status: t.status, total: t.total, succeeded: t.succeeded, failed: t.failed, failureReasons: r.failureReasons }));
        if (t.status === 'FAILED') process.exitCode = 1;
        return;
      }
      await new Promise((r) => setTimeout(r, 250));
    }
  } finally {
    await s.close();
  }
}
