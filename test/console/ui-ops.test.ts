// More of the console in a real browser (Debian's chromium, playwright-core) against a real metarelay on
// anvil, read as a person reads it: activity paged to its 131st row, a balance adjusted in dollars and
// its day's-end chart against the ledger, an account's indexed balances with their pictures on the first
// look, and Health while the chain's node cannot be reached. Screenshots at 1280 and 390 px.
import { asOperator } from '../support/service.ts';
import type { Browser, Page } from 'playwright-core';
import type { Address } from 'viem';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { solidPng } from '../support/media.ts';
import { startRelayerEnv, type RelayerEnv } from '../support/relayer-env.ts';
import { waitFor } from '../support/relay-load.ts';
import { newSigner } from '../support/sequence-wallet.ts';
import { startRawServer, startTokenChain, type RawServer, type TokenChain } from '../support/token-chain.ts';
import { TEST_DB } from '../support/env.ts';
import { WIDE, launchBrowser, loadedWidth, shot as shotOf, signIn } from './browser.ts';

let env: RelayerEnv;
let browser: Browser;
let page: Page;
let nft: Address;
let logos: RawServer;
let chain: TokenChain;
const holder = newSigner().address.toLowerCase() as Address;
/** ETH/USD of the chain's feed: $2 000. */
const USD_RATE = 2000;

beforeAll(async () => {
  chain = await startTokenChain();
  const [feed] = await chain.deploy([{ contract: 'DevAggregator', args: [8, BigInt(USD_RATE * 1e8)] }]);
  env = await startRelayerEnv({
    chain,
    proxy: true,
    rpcTimeoutMs: 1_000,
    relayer: { nativeUsdFeed: { feed, heartbeatSec: 3_600 } },
    indexer: { scope: 'all', fromBlock: 0, confirmations: 0, chunkBlocks: 50, pollMs: 100 },
  });
  const logo = await solidPng(160, 160, '#1d7a4f');
  logos = await startRawServer((_req, res) => res.writeHead(200, { 'content-type': 'image/png' }).end(logo));
  [nft] = await env.chain.deploy([{ contract: 'DevERC721OnChain' }]);
  await env.chain.send([
    { address: nft, contract: 'DevERC721OnChain', functionName: 'mint', args: [holder, 7n] },
    { address: env.token, contract: 'DevERC20', functionName: 'mint', args: [holder, 2_500_000n] },
  ]);
  // The indexer's follower (serve starts it with the rest of the background work).
  env.services.startBackground();
  await env.services.contractStore.upsertLayers(env.chainId, [{ address: env.token.toLowerCase() as Address, override: { logoURI: `${logos.url}/fusd.png` } }]);
  browser = await launchBrowser();
  page = await browser.newPage({ viewport: WIDE });
  await signIn(page, env.baseUrl, env.adminToken);
}, 180_000);

afterAll(async () => {
  await browser?.close();
  await env?.close();
  // Passed in, so the test's to stop (env.close stops only a chain it started).
  await chain?.stop();
  await logos?.stop();
});

const shot = (name: string) => shotOf(page, name);
const dbRows = async <T>(sql: string, args: unknown[]) => (await env.services.db.query<T>(sql, args)).rows;
async function admin(method: string, body: unknown) {
  const r = await fetch(`${env.baseUrl}/rpc/Console/${method}`, {
    method: 'POST',
    headers: { 'content-type': 'application/json', authorization: `Bearer ${env.adminToken}` },
    body: JSON.stringify(body),
  });
  expect(r.status).toBe(200);
  return r.json();
}

describe(`console pages as a person reads them (${TEST_DB})`, () => {
  it('pages the activity list to row 131 of 131 with Older, and back with Newer', async () => {
    const projectId = (await admin('CreateProject', { name: `paged-${Math.random().toString(36).slice(2, 8)}` })).project.id as number;
    // 131 meta-transactions as fixtures (relaying 131 would test the relayer, not the list), newest i = 131.
    await env.services.db.query(
      `INSERT INTO meta_txns (chain_id, id, project_id, wallet, entrypoint, input, status, gas_limit, gas_estimated, queued_at)
       SELECT $1, lpad(to_hex(i), 64, '0'), $2, $3, '0x0000000000000000000000000000000000000001', '0x', CASE WHEN i % 10 = 0 THEN 'FAILED' ELSE 'SUCCEEDED' END,
              100000, 90000, timestamptz '2026-11-01 00:00:00+00' + i * interval '1 minute'
         FROM generate_series(1, 131) AS i`,
      [env.chainId, projectId, holder],
    );
    await page.goto(`${env.baseUrl}/console/#/projects/${projectId}/activity`);
    const count = page.getByTestId('activity-count');
    await expect.poll(() => count.textContent()).toBe('1–25 of 131 meta-transactions');
    expect(await page.getByTestId('activity').locator('tbody tr').count()).toBe(25);
    for (const first of [26, 51, 76, 101, 126]) {
      await page.getByTestId('activity-older').click();
      await expect.poll(() => count.textContent(), { timeout: 10_000 }).toBe(`${first}–${Math.min(first + 24, 131)} of 131 meta-transactions`);
    }
    // The last page: rows 126 to 131, the oldest (i = 1) at the bottom, and no Older.
    const rows = page.getByTestId('activity').locator('tbody tr');
    expect(await rows.count()).toBe(6);
    expect(await rows.last().getAttribute('data-testid')).toBe(`tx-${'1'.padStart(64, '0')}`);
    expect(await page.getByTestId('activity-older').isDisabled()).toBe(true);
    await shot('activity-last-page');
    await page.getByTestId('activity-newer').click();
    await expect.poll(() => count.textContent()).toBe('101–125 of 131 meta-transactions');
    // A filter starts again at its first page, with its own count.
    await page.getByTestId('filter-status').selectOption('FAILED');
    await expect.poll(() => count.textContent()).toBe('1–13 of 13 meta-transactions');
  });

  it("takes a balance in dollars, shows it in ETH and USD, and charts each day's end balance as the ledger has it", async () => {
    const projectId = (await admin('CreateProject', { name: `tank-${Math.random().toString(36).slice(2, 8)}` })).project.id as number;
    await page.goto(`${env.baseUrl}/console/#/projects/${projectId}/balance`);
    const panel = page.locator('[data-testid^="balance-"]').first();
    // A project made elsewhere (here: the API) since the page read its list opens from its link.
    await panel.waitFor();
    // $50 at $2 000/ETH: 0.025 ETH, shown as typed.
    await panel.getByTestId('adjust-unit').selectOption('usd');
    await panel.getByTestId('adjust-amount').fill('50');
    await expect.poll(() => panel.getByTestId('adjust-hint').textContent()).toBe('= 0.025 ETH = 25,000,000,000,000,000 wei ≈ $50.00');
    await panel.getByTestId('adjust-balance').click();
    await expect.poll(() => panel.getByTestId('balance-amount').getAttribute('data-wei')).toBe('25000000000000000');
    expect(await panel.getByTestId('balance-amount').textContent()).toBe('0.025 ETH · $50.00');
    expect(await panel.getByTestId('balance-amount').getAttribute('title')).toBe('25000000000000000 wei (click to copy)');
    await panel.getByTestId('adjust-unit').selectOption('native');
    await panel.getByTestId('adjust-amount').fill('-0.005');
    await panel.getByTestId('adjust-balance').click();
    await expect.poll(() => panel.getByTestId('balance-amount').getAttribute('data-wei')).toBe('20000000000000000');

    await page.goto(`${env.baseUrl}/console/#/projects/${projectId}/overview`);
    const chart = page.getByTestId('tank-chart');
    await chart.waitFor();
    const [last] = await dbRows<{ day: string; wei: string }>(
      `SELECT to_char((created_at AT TIME ZONE 'UTC')::date, 'YYYY-MM-DD') AS day, balance_wei::text AS wei FROM gas_tank_ledger WHERE project_id = $1 ORDER BY id DESC LIMIT 1`,
      [projectId],
    );
    expect(last.wei).toBe('20000000000000000');
    expect(await chart.locator('rect').count()).toBe(30);
    expect(await chart.locator(`rect[data-key="${last.day}"]`).getAttribute('data-value')).toBe(last.wei);
    expect(await chart.locator(`rect[data-key="${last.day}"] title`).textContent()).toBe(`${last.day}: 0.02 ETH ($40.00) at the day's end`);
    // Days before the first entry had no balance.
    expect(await chart.locator('rect').first().getAttribute('data-value')).toBe('');
    await shot('project-overview-balance');
  });

  it("shows an account's indexed balances with the collectible's picture and the token's logo on the first look", async () => {
    await waitFor('the indexer to hold both balances', async () => (await admin('IndexerBalances', { chainID: String(env.chainId), accountAddress: holder })).balances.length === 2, 90_000, 200);
    await page.getByTestId('nav-indexer').click();
    await page.getByTestId('balances-account').fill(holder);
    await page.getByTestId('balances-lookup').click();
    await expect.poll(() => page.getByTestId('balances-count').textContent()).toBe(`1–2 on ${env.chain.chainConfig.name}`);
    const nftRow = page.getByTestId(`balance-${nft.toLowerCase()}-7`);
    const tokenRow = page.getByTestId(`balance-${env.token.toLowerCase()}-0`);
    expect(await nftRow.textContent()).toContain('ERC721');
    expect(await tokenRow.getByTestId('balance-amount').textContent()).toBe('2.5');
    expect(await tokenRow.textContent()).toContain('FUSD');
    // The pictures load on this first look (64 px renditions from this origin): the on-chain SVG rasterised, the logo fetched.
    await expect.poll(() => nftRow.getByTestId(`balance-picture-${nft.toLowerCase()}-7`).evaluate(loadedWidth), { timeout: 30_000 }).toBe(64);
    await expect.poll(() => tokenRow.getByTestId(`logo-${env.token.toLowerCase()}`).evaluate(loadedWidth), { timeout: 30_000 }).toBe(64);
    await shot('indexer-balances');
  });

  it('keeps the last head, queue and senders on Health while the node cannot be reached, and says since when and why', async () => {
    const name = env.chain.chainConfig.name;
    // Up first: the sweep has read every sender (balance, when).
    await waitFor('each sender read', async () => {
      const b = (await env.app.inject({ method: 'GET', url: '/ready', headers: asOperator })).json();
      return b.chains[0].relayer?.senders.every((x: { balanceAt: string | null }) => x.balanceAt);
    });
    await page.getByTestId('nav-health').click();
    const panel = page.getByTestId(`health-${name}`);
    await panel.getByTestId('head').waitFor();
    // The API processes sharing the rates: this one alone (in process, never counted on a database).
    expect(await page.getByTestId('fleet').textContent()).toBe('API processes on this database: 1 (this one holds every configured rate)');
    const head = Number(await panel.getByTestId('head').textContent());
    const balance = (await panel.getByTestId('sender-balance-0').textContent())!;
    const drop = env.proxy!.addRule(() => ({ kind: 'drop' }));
    try {
      await page.reload();
      await panel.getByTestId('outage').waitFor({ timeout: 30_000 });
      const state = (await env.app.inject({ method: 'GET', url: `/ready?chain=${name}`, headers: asOperator })).json().chains[0];
      expect(await panel.getByTestId('outage').textContent()).toBe(
        `Down since ${await page.evaluate(
          (t) =>
            new Date(t).toLocaleString('en-US', { year: 'numeric', month: 'short', day: 'numeric', hour: '2-digit', minute: '2-digit', second: '2-digit', hourCycle: 'h23', timeZoneName: 'short' }),
          state.downSince,
        )}: ${state.cause}. Shown below: what was last known.`,
      );
      expect(Number(await panel.getByTestId('head').textContent())).toBeGreaterThanOrEqual(head);
      expect(await panel.textContent()).toContain('Last head seen');
      // The senders' balances as last read, and when.
      // (In ETH as before; its dollars only while the native/USD feed can still be read.)
      const during = (await panel.getByTestId('sender-balance-0').textContent())!;
      expect(during.startsWith(`${balance.split(' · ')[0]} `)).toBe(true);
      expect(during).toMatch(/ \(as of .+\)$/);
      expect(await panel.textContent()).toMatch(/Queue: \d+ queued, \d+ sent and not yet mined/);
      await shot('health-outage');
    } finally {
      drop();
    }
  });
});
