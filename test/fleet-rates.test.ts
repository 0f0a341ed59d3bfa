// Rates that hold across a fleet (util/fleet-share.ts): three `serve` processes on one PostgreSQL
// database count themselves (a shared advisory lock each, on their lock connections) and each holds a
// third of every in-memory bucket. A client calling all three round-robin gets the configured burst in
// total, not three times it: for the relayer's keyless callers (relayer.anonymousBurst) and for a
// key's Indexer reads (indexer.readShares.keyBurst). One process killed, the two left count 2 and each
// holds half. Judged by counted 200s and 429s of requests fired at once (the rates refill a token in
// minutes, nothing over the test), and by bounded polls on the count each process reports. Before:
// each process held the whole burst, 3× in all. PostgreSQL only: PGlite is one process per database.

import { mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { generatePrivateKey, privateKeyToAddress } from 'viem/accounts';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { accessKeyRepo } from '../src/store/access-keys.ts';
import { projectRepo } from '../src/store/projects.ts';
import { startCli, type LongRunning } from './support/cli.ts';
import { freePort } from './support/ports.ts';
import { waitFor } from './support/relay-load.ts';
import { QUOTE_SECRET } from './support/relayer-env.ts';
import { relayedChainConfig, startSponsoredChain, type SponsoredChain } from './support/sponsored-chain.ts';

/** The configured bursts: what the whole fleet admits at once. */
const BURST = 30;
const ADMIN = 'fleet-rates-admin-token-0123456789';

let env: SponsoredChain;
let procs: LongRunning[] = [];
let bases: string[] = [];
let keys: string[] = [];
const dir = mkdtempSync(join(tmpdir(), 'metarelay-fleet-rates-'));

/** What a process reports as the API processes live (its /ready body, with the admin token). */
async function counted(base: string): Promise<number | undefined> {
  const r = await fetch(`${base}/ready`, { headers: { authorization: `Bearer ${ADMIN}` } }).catch(() => undefined);
  if (!r?.ok) return undefined;
  return ((await r.json()) as { fleet?: { apiProcesses: number } }).fleet?.apiProcesses;
}

async function everyCounts(at: string[], n: number): Promise<void> {
  await waitFor(`${at.length} processes counting ${n}`, async () => (await Promise.all(at.map(counted))).every((c) => c === n), 30_000, 100);
}

/** `count` calls fired at once, the i-th to at[i % at.length]: how many each process answered 200, and every status seen. */
async function burst(at: string[], count: number, call: (base: string, i: number) => Promise<Response>): Promise<{ okBy: number[]; statuses: number[] }> {
  const answers = await Promise.all(Array.from({ length: count }, (_, i) => call(at[i % at.length]!, i).then((r) => r.body?.cancel().then(() => r.status) ?? r.status)));
  const okBy = at.map((_, p) => answers.filter((s, i) => s === 200 && i % at.length === p).length);
  return { okBy, statuses: [...new Set(answers)].sort() };
}

const relayerPing = (base: string) => fetch(`${base}/relayer/${env.chain.chainConfig.name}/rpc/Relayer/Ping`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: '{}' });

/** A balance read, of a different account each time (nothing answered from the response cache): 1 unit of the key's read share. */
const indexerRead = (key: string) => (base: string) =>
  fetch(`${base}/indexer/${env.chain.chainConfig.name}/rpc/Indexer/GetTokenBalances`, {
    method: 'POST',
    headers: { 'content-type': 'application/json', 'x-access-key': key },
    body: JSON.stringify({ accountAddress: privateKeyToAddress(generatePrivateKey()) }),
  });

beforeAll(async () => {
  env = await startSponsoredChain('fleet-rates');
  const project = await projectRepo(env.testDb.db).create(`fleet-rates-${Math.random().toString(36).slice(2, 8)}`);
  keys = [(await accessKeyRepo(env.testDb.db).create(project.id, 'three')).key, (await accessKeyRepo(env.testDb.db).create(project.id, 'two')).key];
  const ports = [await freePort(), await freePort(), await freePort()];
  bases = ports.map((p) => `http://127.0.0.1:${p}`);
  procs = ports.map((port, i) => {
    const file = join(dir, `serve-${i}.json`);
    writeFileSync(
      file,
      JSON.stringify({
        port,
        database: env.testDb.location,
        allowPrivateNetworks: true,
        logLevel: 'info',
        admin: { tokens: [ADMIN] },
        // API processes only: no follower, no dispatcher.
        inProcessWorker: false,
        // The count is taken every leaderCheckMs: short here, so the test waits little.
        postgres: { leaderCheckMs: 250, leaderSessionTimeoutMs: 5_000 },
        media: { enabled: false },
        // The rates refill a token in 1 000 s (keyless calls) and 100 s (reads): nothing over the test, so only the bursts count.
        relayer: { quoteSecret: QUOTE_SECRET, inProcessDispatcher: false, anonymousRatePerSec: 0.001, anonymousBurst: BURST },
        // One client network of the key may spend all of it (clientFraction 1): the key's bucket is what is judged.
        indexer: { readShares: { keyUnitsPerSec: 0.01, keyBurst: BURST, clientFraction: 1 } },
        chains: [{ ...relayedChainConfig(env.chain, env.token), indexer: { scope: 'all', fromBlock: 0, confirmations: 0 } }],
      }),
    );
    return startCli(['serve', '--config', file]);
  });
  await Promise.all(procs.map((p) => p.waitFor(/Server listening at/)));
}, 120_000);

afterAll(async () => {
  await Promise.all(procs.map((p) => p.stop('SIGKILL')));
  await env?.testDb.drop();
  await env?.chain.stop();
});

describe('configured rates across a fleet of three serve processes', () => {
  it('a client calling all three round-robin gets the configured burst in total; one killed, the two left hold half each', async () => {
    await everyCounts(bases, 3);
    const metrics = await (await fetch(`${bases[0]}/metrics`, { headers: { authorization: `Bearer ${ADMIN}` } })).text();
    expect(metrics).toMatch(/^metarelay_fleet_api_processes 3$/m);
    const health = await fetch(`${bases[1]}/rpc/Console/Health`, { method: 'POST', headers: { 'content-type': 'application/json', authorization: `Bearer ${ADMIN}` }, body: '{}' });
    expect((await health.json()).fleet).toEqual({ apiProcesses: 3 });

    // Keyless relayer calls from one address: 3 bursts' worth at once, a third at each process.
    const keyless = await burst(bases, 3 * BURST, relayerPing);
    expect(keyless.statuses).toEqual([200, 429]);
    expect(keyless.okBy).toEqual([BURST / 3, BURST / 3, BURST / 3]);

    // A key's Indexer reads: the same.
    const reads = await burst(bases, 3 * BURST, indexerRead(keys[0]!));
    expect(reads.statuses).toEqual([200, 429]);
    expect(reads.okBy).toEqual([BURST / 3, BURST / 3, BURST / 3]);

    // One process killed: its lock connection goes with it, and the two left count 2 at their next check.
    procs[2]!.child.kill('SIGKILL');
    const left = bases.slice(0, 2);
    await everyCounts(left, 2);

    // Another key's reads through the two: still the configured burst in all, half at each.
    const after = await burst(left, 2 * BURST, indexerRead(keys[1]!));
    expect(after.statuses).toEqual([200, 429]);
    expect(after.okBy).toEqual([BURST / 2, BURST / 2]);
  }, 300_000);
});
