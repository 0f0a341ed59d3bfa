// PostgreSQL faults under a real `metarelay serve` taking sponsored meta-transactions: the server stopped
// with `-m immediate` (every backend killed, open transactions lost) and started again, every backend
// terminated, an immediate restart, and every connection slot taken. The process must live through all
// of it, answer 503 with Retry-After while the database cannot serve (never 500, never a reset), and take
// calls again by itself once it can; every meta-transaction it accepted runs exactly once on chain.
// The cluster is this file's own (support/private-postgres.ts): the shared server is not restarted.

import { mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import pg from 'pg';
import { createPublicClient, http, parseAbi, type Address } from 'viem';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { Db } from '../src/store/db.ts';
import { migrate } from '../src/store/migrate.ts';
import { openPostgres } from '../src/store/postgres.ts';
import { startCli, type LongRunning } from './support/cli.ts';
import { freePort } from './support/ports.ts';
import { startPrivatePostgres, type PrivatePostgres } from './support/private-postgres.ts';
import { deployWallets, expectClean, mintBundles, waitFor, type LoadItem, type User } from './support/relay-load.ts';
import { QUOTE_SECRET, type RelayerEnv } from './support/relayer-env.ts';
import { OPERATOR_TOKEN, asOperator } from './support/service.ts';
import { relayedChainConfig, sponsoredProject, startTokenChainWithContext } from './support/sponsored-chain.ts';
import type { TokenChain } from './support/token-chain.ts';

const USERS = 12;
const SPACES = 4;
/** Below what one serve may open (a pool of 10 and the dispatchers' 5): the boot warns, and slots run out for real. */
const MAX_CONNECTIONS = 16;

let cluster: PrivatePostgres;
let chain: TokenChain;
let db: Db;
let serve: LongRunning | undefined;
let env: RelayerEnv;
let users: User[];
let items: LoadItem[];
let relayer: string;
let accessKey: string;
let url: string;

beforeAll(async () => {
  let token: Address;
  [cluster, { chain, token }] = await Promise.all([startPrivatePostgres({ maxConnections: MAX_CONNECTIONS }), startTokenChainWithContext()]);
  // The service's role is no superuser: the slots kept for superusers stay the test's, to take the rest.
  await cluster.sql('CREATE ROLE relay LOGIN');
  await cluster.sql('CREATE DATABASE metarelay OWNER relay');
  url = cluster.url('metarelay', 'relay');
  db = await openPostgres(url, { max: 2, maintain: false });
  await migrate(db);
  accessKey = await sponsoredProject(db, chain.chainConfig.chainId, token, 'pg-faults');

  const pub = createPublicClient({ transport: http(chain.anvil.rpcUrl), cacheTime: 0 });
  env = { rpcUrl: chain.anvil.rpcUrl, public: pub, chainId: chain.chainConfig.chainId, token, services: { db } } as unknown as RelayerEnv;
  users = await deployWallets(env, USERS);
  items = await mintBundles(env, users, SPACES);

  const port = await freePort();
  const config = join(mkdtempSync(join(tmpdir(), 'metarelay-pgfaults-')), 'config.json');
  writeFileSync(
    config,
    JSON.stringify({
      port,
      database: url,
      allowPrivateNetworks: true,
      logLevel: 'warn',
      inProcessWorker: false,
      relayer: { quoteSecret: QUOTE_SECRET },
      admin: { tokens: [OPERATOR_TOKEN] },
      // A second's wait for a lock, not the 5 s default: the frozen holder below is met quickly.
      postgres: { lockTimeoutMs: 1_000 },
      chains: [relayedChainConfig(chain, token)],
    }),
  );
  serve = startCli(['serve', '--config', config]);
  await waitFor(
    'metarelay to answer',
    () =>
      fetch(`http://127.0.0.1:${port}/ready`)
        .then((r) => r.ok)
        .catch(() => false),
    60_000,
    100,
  );
  relayer = `http://127.0.0.1:${port}/relayer/${chain.chainConfig.name}/rpc/Relayer`;
}, 120_000);

afterAll(async () => {
  await serve?.stop('SIGKILL');
  await db?.close();
  await cluster?.destroy();
  await chain?.stop();
});

const base = () => relayer.replace(/\/relayer\/.*$/, '');

async function call(url: string, body: unknown) {
  const r = await fetch(url, { method: 'POST', headers: { 'content-type': 'application/json', 'x-access-key': accessKey }, body: JSON.stringify(body) });
  return { status: r.status, retryAfter: r.headers.get('retry-after'), body: (await r.json()) as Record<string, unknown> };
}

const send = (item: LoadItem) => call(`${relayer}/SendMetaTxn`, { call: { walletAddress: item.user.wallet.address, contract: item.bundle.entrypoint, input: item.bundle.input } });

/** What the load saw: accepted calls, 503s (each with Retry-After), and anything else (a failure of the test). */
interface Seen {
  accepted: number;
  unavailable: number;
}

/**
 * SendMetaTxn for every item, 4 at a time, each sent again after a 503 (as a client told Retry-After
 * would, without the wait) until accepted. Any other answer, or no answer (a reset, a refused
 * connection: the process died), fails the run. Returns the ids.
 */
async function sendUntilAccepted(batch: LoadItem[], seen: Seen): Promise<string[]> {
  const ids: string[] = [];
  let next = 0;
  await Promise.all(
    Array.from({ length: 4 }, async () => {
      while (next < batch.length) {
        const i = next++;
        for (;;) {
          const r = await send(batch[i]);
          if (r.status === 200) {
            ids[i] = r.body.txnHash as string;
            seen.accepted++;
            break;
          }
          if (r.status !== 503 || r.retryAfter === null) throw new Error(`SendMetaTxn answered ${r.status} (Retry-After ${r.retryAfter}): ${JSON.stringify(r.body)}`);
          expect(r.body).toMatchObject({ error: 'Unavailable', code: 2002, status: 503 });
          seen.unavailable++;
          await new Promise((res) => setTimeout(res, 50));
        }
      }
    }),
  );
  return ids;
}

/**
 * SendMetaTxn of an accepted item, again and again until stopped (each one reads the database): load
 * that is still running when a fault lands, however fast the batches drain. Each answer must be 200 (it
 * is known) or 503 with Retry-After.
 */
function churn(item: LoadItem, seen: Seen): () => Promise<void> {
  let on = true;
  const running = (async () => {
    while (on) {
      const r = await send(item);
      if (r.status === 503 && r.retryAfter !== null) seen.unavailable++;
      else if (r.status !== 200) throw new Error(`SendMetaTxn of a known item answered ${r.status}: ${JSON.stringify(r.body)}`);
      await new Promise((res) => setTimeout(res, 20));
    }
  })();
  running.catch(() => undefined);
  return async () => {
    on = false;
    await running;
  };
}

const alive = () => serve!.child.exitCode === null && serve!.child.signalCode === null;
/** /ready with its full body (an operator's token). */
const ready = () => fetch(`${base()}/ready`, { headers: asOperator }).then(async (r) => ({ status: r.status, body: (await r.json()) as { ready: boolean; database?: { ok: boolean } } }));
/** Every client backend but the asking one, ended (as pg_terminate_backend by an operator or a failover does). */
const terminateAll = (where = 'true') => cluster.sql(`SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE backend_type = 'client backend' AND pid <> pg_backend_pid() AND ${where}`);

describe('PostgreSQL faults under load (a private cluster, a real serve process)', () => {
  it('warns at boot that processes × pools can pass max_connections, saying what to change', () => {
    expect(serve!.output()).toMatch(/PostgreSQL may run out of connections: max_connections is 16 \(13 without the superuser reserve\).*Lower postgres\.poolSize, raise max_connections/);
  });

  it('survives an immediate stop, a terminated backend and an immediate restart: 503 while down, accepted after, each meta-transaction executed once', async () => {
    const ids: string[] = [];
    const seen: Seen = { accepted: 0, unavailable: 0 };
    ids.push(...(await sendUntilAccepted(items.slice(0, 16), seen)));

    // Stopped under load, transactions open: calls answer 503 while it is down, and /ready says so.
    const stopChurn = churn(items[0], seen);
    const during = sendUntilAccepted(items.slice(16, 32), seen);
    // Awaited below; a failure before that is the test's, not an unhandled rejection besides it.
    during.catch(() => undefined);
    await waitFor('a few accepted before the stop', async () => seen.accepted >= 20, 60_000, 10);
    await cluster.stopImmediate();
    const down = await send(items[0]);
    expect(down.status).toBe(503);
    expect(down.retryAfter).toBe('2');
    expect(down.body).toMatchObject({ error: 'Unavailable', code: 2002, status: 503, cause: expect.stringMatching(/database cannot serve now/) });
    // Reads too, in each service's words: the relayer's Unavailable, the metadata service's Fail.
    const [receipt, contract] = await Promise.all([
      call(`${relayer}/GetMetaTxnReceipt`, { metaTxID: ids[0] }),
      call(`${base()}/rpc/Metadata/GetContractInfo`, { chainID: chain.chainConfig.name, contractAddress: env.token }),
    ]);
    expect([receipt.status, receipt.retryAfter, receipt.body.code]).toEqual([503, '2', 2002]);
    expect([contract.status, contract.retryAfter, contract.body.code]).toEqual([503, '2', 1005]);
    for (const r of [receipt, contract]) expect(r.body.cause).toMatch(/database cannot serve now/);
    const notReady = await ready();
    expect(notReady.status).toBe(503);
    expect(notReady.body).toMatchObject({ ready: false, database: { ok: false } });
    const anonymous = await fetch(`${base()}/ready`);
    expect([anonymous.status, await anonymous.json()]).toEqual([503, { ready: false }]);
    await waitFor('the load to meet the outage', async () => seen.unavailable > 0, 30_000, 20);
    expect(alive()).toBe(true);
    await cluster.start();
    ids.push(...(await during));
    await stopChurn();
    await waitFor('/ready again', async () => (await ready()).status === 200, 30_000, 100);

    // Every backend terminated, then the server restarted at once, both under load.
    const stopChurnAgain = churn(items[1], seen);
    const more = sendUntilAccepted(items.slice(32), seen);
    more.catch(() => undefined);
    await waitFor('load before the terminations', async () => seen.accepted >= 34, 60_000, 10);
    await terminateAll();
    await waitFor('load between the faults', async () => seen.accepted >= 40, 60_000, 10);
    await cluster.restartImmediate();
    ids.push(...(await more));
    await stopChurnAgain();
    expect(alive()).toBe(true);
    expect(seen.unavailable).toBeGreaterThan(0);

    // Accepted once each, executed once each: statuses, slots, sender and wallet nonces, balances (expectClean).
    await expectClean(env, ids, users, SPACES);
    const supply = await env.public.readContract({ address: env.token, abi: parseAbi(['function totalSupply() view returns (uint256)']), functionName: 'totalSupply' });
    expect(supply).toBe(BigInt(USERS * SPACES));
  }, 180_000);

  it('a process frozen mid-transaction on the sponsorship rows: 503 after lock_timeout, and accepted once the server ends its session (idle_in_transaction_session_timeout)', async () => {
    const extra = await deployWallets(env, 2);
    const fresh = await mintBundles(env, extra, 1);
    // A metarelay process's connection (the same session options), frozen inside a transaction that
    // holds the rows a sponsored intake locks to charge the rule: the rule's row and every shard of
    // its spend (an intake charges its backend's shard, or takes the rule's row to re-share).
    const frozen = await openPostgres(url, { max: 1, probe: false, maintain: false, session: { poolSize: 1, lockTimeoutMs: 0, idleInTransactionTimeoutMs: 2_000 } });
    let locked!: () => void;
    const gotLock = new Promise<void>((r) => (locked = r));
    let thaw!: () => void;
    const thawed = new Promise<void>((r) => (thaw = r));
    const holder = frozen.transaction(async (tx) => {
      await tx.query('SELECT id FROM gas_sponsors FOR UPDATE');
      await tx.query('SELECT sponsor_id FROM sponsor_spend_shards FOR UPDATE');
      locked();
      await thawed;
      await tx.query('SELECT 1');
    });
    holder.catch(() => undefined);
    try {
      await gotLock;
      const blocked = await send(fresh[0]);
      expect(blocked.status).toBe(503);
      expect(blocked.retryAfter).toBe('2');
      expect(blocked.body).toMatchObject({ error: 'Unavailable', code: 2002, cause: expect.stringMatching(/lock_timeout/) });
      const ids = [];
      for (const item of fresh) {
        const accepted = await waitFor(
          'a call accepted once the frozen session is ended',
          async () => {
            const r = await send(item);
            return r.status === 200 && r;
          },
          20_000,
          100,
        );
        ids.push(accepted.body.txnHash as string);
      }
      thaw();
      // The frozen transaction lost its session to the server (this process lives on: the pool heard it).
      await expect(holder).rejects.toThrow();
      await expectClean(env, ids, extra, 1);
    } finally {
      thaw();
      await frozen.close();
    }
    expect(alive()).toBe(true);
  }, 60_000);

  it('answers 503 "too many clients" while every slot is taken, and serves again once one is free', async () => {
    // The service's role is kept out while its connections are ended and the slots taken (it would race
    // for them), then let in again: its next connection finds every slot full.
    const hogs: pg.Client[] = [];
    const hog = async () => {
      const c = new pg.Client({ connectionString: cluster.url('postgres') });
      c.on('error', () => undefined);
      await c.connect();
      hogs.push(c);
    };
    try {
      await hog();
      await hogs[0].query('ALTER ROLE relay CONNECTION LIMIT 0');
      await terminateAll(`usename = 'relay'`);
      await waitFor(
        'the slots to fill',
        () =>
          hog().then(
            () => false,
            (err: { code?: string }) => err.code === '53300',
          ),
        30_000,
        0,
      );
      await hogs[0].query('ALTER ROLE relay CONNECTION LIMIT -1');

      const full = await send(items[0]);
      expect(full.status).toBe(503);
      expect(full.retryAfter).toBe('2');
      expect(full.body).toMatchObject({ error: 'Unavailable', code: 2002, cause: expect.stringMatching(/too many connections/) });
      expect((await ready()).status).toBe(503);
    } finally {
      await Promise.all(hogs.map((c) => c.end().catch(() => undefined)));
    }
    const again = await waitFor('a call accepted once slots are free', async () => {
      const r = await send(items[0]);
      return r.status === 200 && r;
    });
    expect(again.body.txnHash).toBeTruthy();
    expect(alive()).toBe(true);
    if (process.env.TEST_LOG) console.log(serve!.output());
    // Logged once per outage (four faults), not per call or per loop turn; nothing at error, no unhandled error.
    const out = serve!.output();
    const outages = out.match(/"msg":"database unavailable"/g)?.length ?? 0;
    expect(outages).toBeGreaterThanOrEqual(1);
    expect(outages).toBeLessThanOrEqual(4);
    expect(out, out).not.toMatch(/"level":(50|60)|unhandled error/);
    expect(await serve!.stop('SIGTERM')).toBe(0);
    serve = undefined;
  }, 60_000);
});
