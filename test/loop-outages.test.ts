// A chain that goes down under a running `metarelay serve` (the build the package ships): each
// background loop that meets it (the metadata watcher, the indexer's follower, the relayer's dispatcher)
// says so once when its failures begin, with the cause, and once when it works again, however many
// times it tried in between. Before, each failed poll was a warning without the cause: ~42 000 lines a
// day per loop per chain that was down. How a loop logs does not depend on the database: run once, in
// the PGlite half, on an in-memory database.
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startAnvil, type AnvilHandle } from '../src/devchain/anvil.ts';
import { startCli, type LongRunning } from './support/cli.ts';
import { freePort } from './support/ports.ts';
import { waitFor } from './support/relay-load.ts';
import { QUOTE_SECRET, SENDER_KEYS } from './support/relayer-env.ts';
import { startRpcProxy, type RpcProxy } from './support/rpc-proxy.ts';

let anvil: AnvilHandle;
let proxy: RpcProxy;
let srv: LongRunning;
const dir = mkdtempSync(join(tmpdir(), 'metarelay-loop-outages-'));
const LOOPS = ['chain watcher poll', 'indexer poll', 'relayer dispatch tick'];

beforeAll(async () => {
  anvil = await startAnvil({ blockTime: 1 });
  proxy = await startRpcProxy(anvil.rpcUrl);
  const port = await freePort();
  const cfg = join(dir, 'metarelay.json');
  writeFileSync(
    cfg,
    JSON.stringify({
      port,
      database: 'memory://',
      logLevel: 'debug',
      relayer: { quoteSecret: QUOTE_SECRET },
      watcher: { confirmations: 0, pollMs: 200, idleReadMs: 0 },
      chains: [
        {
          chainId: anvil.chainId,
          name: 'flaky',
          rpcUrls: [proxy.url],
          rpcTimeoutMs: 1_000,
          indexer: { confirmations: 0, pollMs: 200, idleReadMs: 0 },
          relayer: { senderKeys: SENDER_KEYS, pollMs: 200 },
        },
      ],
    }),
  );
  srv = startCli(['serve', '--config', cfg]);
  await waitFor('serve ready', async () => (await fetch(`http://127.0.0.1:${port}/ready`).catch(() => undefined))?.status === 200, 90_000);
}, 300_000);

afterAll(async () => {
  await srv?.stop('SIGKILL');
  await proxy?.close();
  await anvil?.stop();
  rmSync(dir, { recursive: true, force: true });
});

const logLines = () =>
  srv
    .output()
    .split('\n')
    .filter((l) => l.startsWith('{'))
    .map((l) => JSON.parse(l) as { level: number; msg: string; cause?: string; failures?: number });

describe('a chain down under serve: every background loop', () => {
  it('logs one line when its failures begin, with the cause, and one when it works again', async () => {
    const before = logLines().length;
    const requestsBefore = proxy.requests.length;
    const drop = proxy.addRule(() => ({ kind: 'drop' }));
    try {
      // Many failed polls of every loop: dozens of connections dropped, and each loop failed again
      // after its first failure (its retries are debug lines).
      await waitFor(
        'each loop failing again',
        async () =>
          proxy.requests.length - requestsBefore >= 60 &&
          LOOPS.every((l) =>
            logLines()
              .slice(before)
              .some((x) => x.msg === `${l} still failing`),
          ),
        60_000,
      );
    } finally {
      drop();
    }
    await waitFor('each loop working again', async () => LOOPS.every((l) => logLines().some((x) => x.msg === `${l} working again`)), 60_000);
    const lines = logLines().slice(before);
    for (const loop of LOOPS) {
      const start = lines.filter((l) => l.msg.startsWith(`${loop} fail`));
      // One line at the start, with the cause in the transport's words (not only viem's "HTTP request failed.").
      expect(start, `${loop}:\n${srv.output()}`).toHaveLength(1);
      expect(start[0].cause).toMatch(/^HTTP request failed: \S/);
      // The chain's own warning (`chain node unreachable`) is the alarm: a loop's start line is info.
      expect(start[0].level).toBe(30);
      const end = lines.filter((l) => l.msg === `${loop} working again`);
      expect(end).toHaveLength(1);
      expect(end[0].failures).toBeGreaterThan(1);
    }
    // The one warning of the outage is the chain's own, once.
    expect(lines.filter((l) => l.level >= 40).map((l) => l.msg)).toEqual(['chain node unreachable']);
    expect(lines.filter((l) => l.msg === 'chain node reachable again')).toHaveLength(1);
  });
});
