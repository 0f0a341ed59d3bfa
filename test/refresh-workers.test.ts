// Refresh workers sharing one queue: two workers (another process on PostgreSQL, another service on
// the same database on PGlite) never fetch a token twice, a dead worker's leased items are taken
// over when the lease runs out, small tasks run before large ones, and the `metarelay refresh` CLI.

import { mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import type { Address } from 'viem';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { AppConfigInput } from '../src/config/schema.ts';
import { startOriginServer, type OriginServer } from '../src/devchain/index.ts';
import type { Services } from '../src/services.ts';
import { runCli, runMain, startCli, type LongRunning } from './support/cli.ts';
import { createTestDb } from './support/db.ts';
import { TEST_DB } from './support/env.ts';
import { call, countsFor, enqueue, erc721WithTokens, range, resultOf, statusOf, waitForEnd } from './support/refresh.ts';
import { startTestService, type TestService } from './support/service.ts';
import { secondProcess, startTokenChain, type TokenChain } from './support/token-chain.ts';

let chain: TokenChain;
let origin: OriginServer;
let nft: Address; // 600 tokens at /w/<id>, each document served after 10 ms

const IDS = range(1, 600);

beforeAll(async () => {
  [chain, origin] = await Promise.all([startTokenChain(), startOriginServer()]);
  for (const id of IDS) origin.setDocument(`/w/${id}`, { name: `W #${id}` }, { delayMs: 10 });
  nft = await erc721WithTokens(chain, origin, '/w/', IDS);
}, 180_000);

afterAll(async () => {
  await Promise.all([chain?.stop(), origin?.stop()]);
});

const chainEntry = () => ({ ...chain.chainConfig, watch: false });
const baseConfig = (refresh: Partial<NonNullable<AppConfigInput['refresh']>> = {}): Partial<AppConfigInput> => ({
  chains: [chainEntry()],
  metadata: { hotCacheTtlMs: 0, fetchTimeoutMs: 3_000, inlineWaitMs: 10_000 },
  refresh: { pollMs: 50, ...refresh },
});

/** Items this process's worker settled, by outcome. */
async function processed(s: Services): Promise<number> {
  const m = await s.metrics.refreshItems.get();
  return m.values.reduce((n, v) => n + v.value, 0);
}

async function withService(config: Partial<AppConfigInput>, fn: (t: TestService) => Promise<void>) {
  const t = await startTestService(config);
  try {
    await fn(t);
  } finally {
    await t.close();
  }
}

describe('two workers on one queue', () => {
  it(`share a 300-token task without fetching any token twice (${TEST_DB === 'postgres' ? 'two services on one pool and a `metarelay worker` process' : 'two services on the same PGlite'})`, () =>
    withService(baseConfig({ claimBatch: 5 }), async (t) => {
      const ids = range(1, 300);
      const second = await secondProcess(t, baseConfig({ claimBatch: 5 }));
      let child: LongRunning | undefined;
      try {
        if (TEST_DB === 'postgres') {
          // A third worker in its own process, with its own connections.
          const dir = mkdtempSync(join(tmpdir(), 'metarelay-worker-'));
          const cfg = join(dir, 'metarelay.json');
          writeFileSync(cfg, JSON.stringify({ database: t.testDb.location, allowPrivateNetworks: true, logLevel: 'info', ...baseConfig({ claimBatch: 5 }) }));
          child = startCli(['worker', '--config', cfg]);
          await child.waitFor(/refresh worker started/);
        }
        const taskId = await enqueue(t, nft, ids);
        // Started together, so their first claims race each other.
        t.services.startBackground();
        second.services.startBackground();
        expect(await waitForEnd(t, taskId, 60_000)).toBe('DONE');
        expect((await resultOf(t, taskId)).failureReasons).toEqual({});

        expect(ids.filter((id) => origin.requestCount(`/w/${id}`) !== 1)).toEqual([]);
        // Each took part; the in-process ones settled what the process did not.
        const [mine, theirs] = [await processed(t.services), await processed(second.services)];
        expect(mine).toBeGreaterThan(0);
        expect(theirs).toBeGreaterThan(0);
        if (child) expect(mine + theirs).toBeLessThan(300);
        else expect(mine + theirs).toBe(300);
      } finally {
        if (child) expect(await child.stop('SIGTERM')).toBe(0);
        await second.close();
      }
    }));

  it('the same tokens queued by two projects are fetched once, and both tasks end DONE', () =>
    withService(baseConfig({ claimBatch: 10 }), async (t) => {
      const ids = range(301, 450);
      const second = await secondProcess(t, baseConfig({ claimBatch: 10 }));
      try {
        const other = await t.services.projects.create('second-project');
        const { key } = await t.services.accessKeys.create(other.id, 'k');
        const a = await enqueue(t, nft, ids);
        const b = await enqueue({ app: second.app, accessKey: key }, nft, [...ids].reverse());
        expect(b).not.toBe(a);
        second.services.startBackground();
        t.services.startBackground();
        expect(await waitForEnd(t, a, 60_000)).toBe('DONE');
        expect(await waitForEnd({ app: second.app, accessKey: key }, b, 60_000)).toBe('DONE');
        expect(Object.values((await resultOf({ app: t.app, accessKey: key }, b)).tokens).every(Boolean)).toBe(true);
        expect(ids.filter((id) => origin.requestCount(`/w/${id}`) !== 1)).toEqual([]);
      } finally {
        await second.close();
      }
    }));
});

describe('claims racing each other', () => {
  it('three workers claiming at the same moment, over tasks of four projects holding the same tokens, fetch each token once', () =>
    withService(baseConfig({ claimBatch: 10 }), async (t) => {
      const others = [await secondProcess(t, baseConfig({ claimBatch: 10 })), await secondProcess(t, baseConfig({ claimBatch: 10 }))];
      try {
        const workers = [t.services.worker, ...others.map((o) => o.services.worker)];
        const client = t.services.chains.get(chain.anvil.chainId)!;
        const projects = [t.project.id];
        for (let k = 1; k < 4; k++) projects.push((await t.services.projects.create(`racer-${k}`)).id);
        for (let round = 0; round < 5; round++) {
          const ids = range(505 + round * 10, 514 + round * 10);
          const tasks: number[] = [];
          for (const p of projects) tasks.push((await t.services.refresh.enqueueTokens(p, client, nft, ids)).taskId);
          // Every worker claims at once; then whatever is left, until nothing is.
          while ((await Promise.all(workers.map((w) => w.tick()))).some((n) => n > 0));
          for (const id of tasks) expect((await t.services.tasks.get(id))!.status).toBe('DONE');
          expect(ids.filter((id) => origin.requestCount(`/w/${id}`) !== 1)).toEqual([]);
        }
      } finally {
        for (const o of others) await o.close();
      }
    }));
});

describe('a worker that dies holding items', () => {
  it('its leased items are taken over once the lease runs out, and the task completes', () =>
    withService(baseConfig(), async (t) => {
      const ids = range(451, 470);
      const taskId = await enqueue(t, nft, ids);
      // The dead worker claims 8 items under a 2-second lease and is never heard from again.
      const claimedAt = Date.now();
      const dead = await t.services.tasks.claim('dead-worker', 8, 2);
      expect(dead).toHaveLength(8);
      const deadIds = dead.map((i) => i.item);

      // A live worker takes everything else at once, but not what the dead one holds.
      const worker = t.services.worker;
      expect(await worker.tick()).toBe(12);
      expect(await worker.tick()).toBe(0);
      expect(await statusOf(t, taskId)).toBe('QUEUED');
      expect(
        countsFor(
          origin,
          deadIds.map((id) => `/w/${id}`),
        ),
      ).toEqual(new Array(8).fill(0));

      await new Promise((r) => setTimeout(r, claimedAt + 2_100 - Date.now()));
      expect(await worker.tick()).toBe(8);
      expect(await statusOf(t, taskId)).toBe('DONE');
      expect(ids.filter((id) => origin.requestCount(`/w/${id}`) !== 1)).toEqual([]);
      const items = await t.services.tasks.items(taskId);
      expect(
        items
          .filter((i) => i.attempts === 2)
          .map((i) => i.item)
          .sort(),
      ).toEqual([...deadIds].sort());
      expect(items.every((i) => i.status === 'DONE')).toBe(true);

      // Should it come back, its late report changes nothing.
      const late = await t.services.tasks.complete(
        'dead-worker',
        chain.anvil.chainId,
        dead.map((i) => ({ taskId, item: i.item, contract: nft, ok: false, reason: 'HTTP_500' })),
      );
      expect(late).toEqual([]);
      expect((await resultOf(t, taskId)).failureReasons).toEqual({});
    }));

  it('with the background worker running, the task completes by itself after the lease', () =>
    withService(baseConfig(), async (t) => {
      const ids = range(471, 480);
      const taskId = await enqueue(t, nft, ids);
      await t.services.tasks.claim('dead-worker', 10, 1);
      const started = Date.now();
      t.services.startBackground();
      expect(await waitForEnd(t, taskId)).toBe('DONE');
      expect(Date.now() - started).toBeGreaterThanOrEqual(900);
      expect(
        countsFor(
          origin,
          ids.map((id) => `/w/${id}`),
        ),
      ).toEqual(new Array(10).fill(1));
    }));
});

describe('recording outcomes', () => {
  it('a failed write of the outcomes is tried again, so the task closes without waiting out the lease', () =>
    withService(baseConfig({ leaseSec: 60 }), async (t) => {
      const taskId = await enqueue(t, nft, ['501', '502']);
      const tasks = t.services.tasks;
      const complete = tasks.complete;
      let calls = 0;
      tasks.complete = async (...args) => {
        if (++calls === 1) throw new Error('deadlock detected');
        return complete(...args);
      };
      try {
        expect(await t.services.worker.tick()).toBe(2);
      } finally {
        tasks.complete = complete;
      }
      expect(calls).toBe(2);
      expect(await statusOf(t, taskId)).toBe('DONE');
    }));

  it('a task counts the items it holds: an id given twice is one item', () =>
    withService(baseConfig(), async (t) => {
      const task = await t.services.tasks.create({
        projectId: t.project.id,
        kind: 'tokens',
        chainId: chain.anvil.chainId,
        contract: nft,
        items: ['503', '504', '503'].map((item) => ({ item, contract: nft })),
        priority: 0,
      });
      expect(task.total).toBe(2);
      expect(await t.services.worker.tick()).toBe(2);
      const done = (await t.services.tasks.get(task.id))!;
      expect([done.status, done.total, done.succeeded, done.failed]).toEqual(['DONE', 2, 2, 0]);
    }));
});

describe('priority', () => {
  it('small API tasks run first, then chain-event tasks, then tasks above largeTaskThreshold', () =>
    withService(baseConfig({ largeTaskThreshold: 5, claimBatch: 2 }), async (t) => {
      const client = t.services.chains.get(chain.anvil.chainId)!;
      const large = await enqueue(t, nft, range(481, 490));
      const { taskId: fromChain } = await t.services.refresh.enqueueTokens(null, client, nft, ['491', '492'], { source: 'watcher' });
      const small = await enqueue(t, nft, ['493', '494']);
      const status = async () => [await t.services.tasks.get(small), await t.services.tasks.get(fromChain), await t.services.tasks.get(large)].map((x) => x!.status);

      expect(await t.services.worker.tick()).toBe(2);
      expect(await status()).toEqual(['DONE', 'QUEUED', 'QUEUED']);
      expect(await t.services.worker.tick()).toBe(2);
      expect(await status()).toEqual(['DONE', 'DONE', 'QUEUED']);
      for (let i = 0; i < 5; i++) expect(await t.services.worker.tick()).toBe(2);
      expect(await status()).toEqual(['DONE', 'DONE', 'DONE']);
      expect(await t.services.worker.tick()).toBe(0);
    }));
});

describe('metarelay refresh (CLI)', () => {
  it('enqueues, works the queue itself, reports progress on stderr and a JSON summary on stdout', async () => {
    origin.setDocument('/w/499', { error: 'gone' }, { status: 404 });
    const db = await createTestDb();
    if (TEST_DB === 'pglite') await db.db.close();
    try {
      const dir = mkdtempSync(join(tmpdir(), 'metarelay-refresh-'));
      const cfg = join(dir, 'metarelay.json');
      writeFileSync(cfg, JSON.stringify({ allowPrivateNetworks: true, logLevel: 'warn', chains: [chainEntry()], refresh: { pollMs: 50 } }));
      const res = await runCli(['refresh', '--config', cfg, '--database', db.location, '--chain', 'anvil', '--contract', nft, '--tokens', '495,496,0x1f1,499']);
      expect(res.stderr).toMatch(/task \d+/);
      expect(res.stderr).toMatch(/refresh #\d+ \[#+\] 100% 4\/4/);
      // The summary is stdout's last line: a warning of the boot's may come before it (logLevel warn; on a
      // server shared by many processes, the connection check's).
      const summary = JSON.parse(res.stdout.trim().split('\n').at(-1)!);
      expect(summary).toMatchObject({ status: 'DONE', total: 4, succeeded: 3, failed: 1, failureReasons: { '499': 'HTTP_404' } });
      expect(res.code).toBe(0);
      expect(countsFor(origin, ['/w/495', '/w/496', '/w/497', '/w/499'])).toEqual([1, 1, 1, 1]);

      // The next two in this process (runMain: main() as the binary runs it): a refresh process loads
      // the whole service, ~1.5 s of CPU before its work; what a shell sees of one is checked above.
      // Every token failing: FAILED and exit code 1.
      const bad = await runMain(['refresh', '--config', cfg, '--database', db.location, '--chain', 'anvil', '--contract', nft, '--tokens', '499']);
      expect(JSON.parse(bad.stdout.trim().split('\n').at(-1)!)).toMatchObject({ status: 'FAILED', failed: 1 });
      expect(bad.code).toBe(1);

      // --all lists the contract's tokens (from its mint logs) and refreshes each.
      for (const id of ['1', '2', '3']) origin.setDocument(`/cli/${id}`, { name: `CLI #${id}` });
      const small = await erc721WithTokens(chain, origin, '/cli/', ['1', '2', '3']);
      const all = await runMain(['refresh', '--config', cfg, '--database', db.location, '--chain', String(chain.anvil.chainId), '--contract', small, '--all']);
      expect(JSON.parse(all.stdout.trim().split('\n').at(-1)!)).toMatchObject({ status: 'DONE', total: 3, succeeded: 3, failed: 0 });
      expect(all.code).toBe(0);
      expect(countsFor(origin, ['/cli/1', '/cli/2', '/cli/3'])).toEqual([1, 1, 1]);

      const usage = await runCli(['refresh', '--config', cfg, '--chain', 'anvil', '--contract', nft]);
      expect(usage.code).not.toBe(0);
      expect(usage.stderr).toMatch(/--tokens 1,2,3 \| --all/);
    } finally {
      await db.drop().catch(() => undefined);
    }
  });
});

// The wire shapes of the contract-info refresh methods, which share the queue.
describe('RefreshContractInfo / RefreshContractInfoBatch', () => {
  it('queue contract tasks that a worker completes', () =>
    withService(baseConfig(), async (t) => {
      const one = await call(t, 'RefreshContractInfo', { chainHandle: 'anvil', contractAddress: nft });
      const many = await call(t, 'RefreshContractInfoBatch', { chainID: 'anvil', contractAddresses: [nft, `0x${'12'.repeat(20)}`] });
      expect(typeof one.body.taskID).toBe('number');
      expect(typeof many.body.taskID).toBe('number');
      t.services.startBackground();
      expect(await waitForEnd(t, one.body.taskID)).toBe('DONE');
      expect(await waitForEnd(t, many.body.taskID)).not.toBe('QUEUED');
      const task = (await call(t, 'GetTask', { taskId: one.body.taskID })).body.task;
      expect(task).toMatchObject({ queue: 'refresh_contracts', status: 'DONE', result: { total: 1, succeeded: 1 } });
      const info = await call(t, 'GetContractInfo', { chainID: 'anvil', contractAddress: nft });
      expect(info.body.contractInfo).toMatchObject({ name: 'Refresh Test', symbol: 'RT', type: 'ERC721' });
    }));
});
