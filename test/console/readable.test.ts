// Amounts as people read them, and tables that work on a phone: a relayed meta-transaction's page
// (calls decoded, gas grouped, fees in gwei, its cost in ETH and in the fee token), Health's senders,
// the sponsorship rules and the fee tokens at 390 px, the activity list as a compact list, "Would this
// be sponsored?" in ETH, the spend axis in decimals, the project list's spend with its unit, times with their zone,
// and a favicon. One browser and one metarelay on anvil for the file; every figure is checked against
// the chain or the database.
import type { Browser, Page } from 'playwright-core';
import { encodeFunctionData, type Address } from 'viem';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { erc20, startRelayerEnv, type RelayerEnv } from '../support/relayer-env.ts';
import { newSigner, signedBundle, walletFor } from '../support/sequence-wallet.ts';
import { startTokenChain, type TokenChain } from '../support/token-chain.ts';
import { TEST_DB } from '../support/env.ts';
import { waitFor } from '../support/relay-load.ts';
import { PHONE, WIDE, launchBrowser, shot as shotOf, signIn } from './browser.ts';

let chain: TokenChain;
let env: RelayerEnv;
let browser: Browser;
let page: Page;
let projectId: number;
let metaTxId: string;
const recipient = newSigner().address;
/** 0.04 FUSD (6 decimals). */
const SENT = 40_000n;

async function admin(method: string, body: unknown) {
  const r = await fetch(`${env.baseUrl}/rpc/Console/${method}`, {
    method: 'POST',
    headers: { 'content-type': 'application/json', authorization: `Bearer ${env.adminToken}` },
    body: JSON.stringify(body),
  });
  expect(r.status, await r.clone().text()).toBe(200);
  return r.json();
}
const dbRows = async <T>(sql: string, args: unknown[]) => (await env.services.db.query<T>(sql, args)).rows;

/** Every cell of `row` lies inside the 390 px viewport (none cut off to the right or hidden). */
async function cellsInView(row: ReturnType<Page['locator']>) {
  return row.evaluate((tr) =>
    [...tr.querySelectorAll('td')]
      .filter((td) => td.textContent!.trim() !== '' && getComputedStyle(td).display !== 'none')
      .map((td) => {
        const r = td.getBoundingClientRect();
        return { text: td.textContent!.trim().slice(0, 20), inside: r.left >= 0 && r.right <= window.innerWidth + 0.5 && r.width > 0 };
      })
      .filter((c) => !c.inside),
  );
}

beforeAll(async () => {
  chain = await startTokenChain();
  // ETH at $2 000 (8 decimals), so amounts have dollars beside them.
  const [feed] = await chain.deploy([{ contract: 'DevAggregator', args: [8, 2000n * 10n ** 8n] }]);
  env = await startRelayerEnv({ chain, relayer: { nativeUsdFeed: { feed, heartbeatSec: 3_600 } } });
  projectId = (await admin('CreateProject', { name: `readable-${Math.random().toString(36).slice(2, 8)}` })).project.id;
  const key = (await admin('CreateAccessKey', { projectId, label: 'readable' })).accessKey as string;
  await admin('AddGasSponsor', { projectId, chainID: String(env.chainId), kind: 'CONTRACT', address: env.token, name: 'FUSD' });
  // One sponsored ERC-20 transfer, relayed for real.
  const s = newSigner();
  const wallet = walletFor(s.address);
  await env.chain.send([{ address: env.token, contract: 'DevERC20', functionName: 'mint', args: [wallet.address, 1_000_000n] }]);
  const data = encodeFunctionData({ abi: erc20, functionName: 'transfer', args: [recipient, SENT] });
  const b = await signedBundle({ signerKey: s.privateKey, wallet, chainId: env.chainId, txs: [{ to: env.token, data }], deployed: false });
  const sent = await env.call('SendMetaTxn', { call: { walletAddress: wallet.address, contract: b.entrypoint, input: b.input } }, { 'x-access-key': key });
  expect(sent.status, JSON.stringify(sent.body)).toBe(200);
  metaTxId = b.id.replace(/^0x/, '').toLowerCase();
  await waitFor('the transfer to succeed', async () => (await env.call('GetMetaTxnReceipt', { metaTxID: b.id })).body.receipt?.status === 'SUCCEEDED', 60_000, 200);
  browser = await launchBrowser();
  // A time zone other than UTC, so a time that names its zone is told from one that does not.
  page = await browser.newPage({ viewport: WIDE, timezoneId: 'Europe/Paris' });
  await signIn(page, env.baseUrl, env.adminToken);
}, 180_000);

afterAll(async () => {
  await browser?.close();
  await env?.close();
  await chain?.stop();
});

const shot = (name: string) => shotOf(page, name);

describe(`amounts people can read, tables that fit a phone (${TEST_DB})`, () => {
  it('loads the console with a favicon and no failed request', async () => {
    const failed: string[] = [];
    const onResponse = (r: { status(): number; url(): string }) => r.status() >= 400 && failed.push(`${r.status()} ${r.url()}`);
    page.on('response', onResponse);
    try {
      await page.goto(`${env.baseUrl}/console/`);
      await page.getByTestId('nav-projects').waitFor();
      const href = await page.locator('link[rel="icon"]').getAttribute('href');
      expect(href).toMatch(/^\/console\/assets\/favicon-.+\.svg$/);
      const icon = await fetch(`${env.baseUrl}${href}`);
      expect(icon.status).toBe(200);
      expect(icon.headers.get('content-type')).toBe('image/svg+xml');
      expect(await icon.text()).toContain('<svg');
      // What the browser itself asked for (the icon included) all answered.
      await expect.poll(() => page.evaluate(() => performance.getEntriesByType('resource').some((e) => e.name.includes('favicon')))).toBe(true);
      expect(failed).toEqual([]);
    } finally {
      page.off('response', onResponse);
    }
  });

  it("shows a meta-transaction's calls decoded, gas grouped, fees in gwei and its cost in ETH and in the fee token", async () => {
    const [row] = await dbRows<{ txn_hash: string; gas_limit: number }>('SELECT txn_hash, gas_limit FROM meta_txns WHERE chain_id = $1 AND id = $2', [env.chainId, metaTxId]);
    const receipt = await env.public.getTransactionReceipt({ hash: row.txn_hash as `0x${string}` });
    const [attempt] = await dbRows<{ max_fee: string; max_priority_fee: string; gas_limit: number }>(
      'SELECT max_fee::text AS max_fee, max_priority_fee::text AS max_priority_fee, gas_limit FROM relay_txs WHERE chain_id = $1 AND hash = $2',
      [env.chainId, row.txn_hash],
    );
    await page.goto(`${env.baseUrl}/console/#/projects/${projectId}/tx/${env.chainId}:${metaTxId}`);
    await page.getByTestId('calls').waitFor();
    // The call, decoded by the ERC-20 ABI: the amount in the fee token's units, as the chain moved it.
    expect(await env.public.readContract({ address: env.token, abi: erc20, functionName: 'balanceOf', args: [recipient] })).toBe(SENT);
    expect(await page.getByTestId('call-0-function').textContent()).toBe('transfer');
    expect(await page.getByTestId('call-0-arg-amount').textContent()).toBe('0.04 FUSD');
    expect(await page.getByTestId('call-0-arg-to').locator('code').getAttribute('title')).toBe(recipient);
    expect(await page.getByTestId('call-0').textContent()).toContain('ERC20');
    // Gas grouped, the sender's outlay as the receipt has it: gas used × effective price.
    const gas = receipt.gasUsed.toLocaleString('en-US');
    expect(receipt.gasUsed).toBeGreaterThan(9_999n);
    expect(await page.getByTestId('detail-gas').textContent()).toBe(`${gas} of a ${row.gas_limit.toLocaleString('en-US')} limit`);
    const wei = receipt.gasUsed * receipt.effectiveGasPrice;
    expect(await page.getByTestId('detail-cost-native').getAttribute('data-wei')).toBe(wei.toString());
    const cost = (await page.getByTestId('detail-cost').textContent())!;
    expect(cost).toMatch(new RegExp(`^${gas} gas × [\\d.,]+ gwei = [\\d.]+ ETH · \\$[\\d.,e-]+`));
    expect(cost).not.toMatch(/\d{10}/);
    // In FUSD at its price (0.0004 ETH per FUSD): wei × 10^6 / (0.0004 × 10^18), to the token's last decimal.
    const units = (wei * 10n ** 6n * 10_000n) / (4n * 10n ** 18n);
    const fusd = `${units / 10n ** 6n}.${(units % 10n ** 6n).toString().padStart(6, '0')}`.replace(/\.?0+$/, '');
    expect((await page.getByTestId('detail-cost-FUSD').textContent())!.trim()).toBe(`≈ ${fusd} FUSD`);
    // The signed attempt's fee caps in gwei, the exact wei kept.
    expect(await page.getByTestId('attempt-max-fee').getAttribute('data-wei')).toBe(attempt.max_fee);
    expect(await page.getByTestId('attempt-max-fee').textContent()).toMatch(/^[\d.,]+ gwei$/);
    expect(await page.getByTestId('attempt-tip').getAttribute('data-wei')).toBe(attempt.max_priority_fee);
    expect(await page.getByTestId('attempt-tip').textContent()).toMatch(/^[\d.,]+ (gwei|wei)$/);
    expect(await page.getByTestId('attempt-gas-limit').textContent()).toBe(attempt.gas_limit.toLocaleString('en-US'));
    // Times name their zone (the page runs in Paris: GMT+1 in December).
    expect(await page.locator('.facts').textContent()).toMatch(/Queued\w{3} \d{1,2}, \d{4}, \d\d:\d\d:\d\d GMT\+1/);
    await shot('activity-detail');
  });

  it('lists activity on a phone as three short lines a row, not a nine-line card', async () => {
    // 24 more meta-transactions as fixtures beside the relayed one: a full page of 25.
    await env.services.db.query(
      `INSERT INTO meta_txns (chain_id, id, project_id, wallet, entrypoint, input, status, gas_limit, gas_estimated, gas_used, gas_price, queued_at)
       SELECT $1, lpad(to_hex(i), 64, '0'), $2, $3, '0x0000000000000000000000000000000000000001', '0x', 'SUCCEEDED', 100000, 90000, 61234, 1500000000,
              timestamptz '2026-11-01 00:00:00+00' + i * interval '1 minute'
         FROM generate_series(1, 24) AS i`,
      [env.chainId, projectId, recipient.toLowerCase()],
    );
    await page.goto(`${env.baseUrl}/console/#/projects/${projectId}/activity`);
    await expect.poll(() => page.getByTestId('activity-count').textContent()).toBe('1–25 of 25 meta-transactions');
    const rows = page.getByTestId('activity').locator('tbody tr');
    await page.setViewportSize(PHONE);
    try {
      const heights = await rows.evaluateAll((trs) => trs.map((tr) => tr.getBoundingClientRect().height));
      const line = await page.evaluate(() => parseFloat(getComputedStyle(document.body).fontSize) * 1.25);
      expect(heights).toHaveLength(25);
      // Three lines and a little padding each.
      for (const h of heights) expect(h).toBeLessThanOrEqual(4 * line);
      // What each line says: the id and status, the wallet and cost, when and where.
      const first = rows.nth(1);
      expect(await cellsInView(first)).toEqual([]);
      // 61 234 gas at 1.5 gwei: 0.000091851 ETH, $0.18 at $2 000.
      expect(await first.getByTestId('tx-cost').textContent()).toBe('0.00009185 ETH · $0.18');
    } finally {
      await page.setViewportSize(WIDE);
    }
    await shot('activity-compact');
  });

  it("shows Health's senders rounded, every column on a phone", async () => {
    await page.getByTestId('nav-health').click();
    const panel = page.getByTestId(`health-${env.chain.chainConfig.name}`);
    const amount = panel.getByTestId('sender-amount-0');
    await amount.waitFor();
    const sender = (await env.services.relayers.get(env.chainId)!.senders[0]) as Address;
    // The figure is the chain's, exact in data-wei, rounded in the text.
    const onChain = await env.public.getBalance({ address: sender });
    expect(BigInt((await amount.getAttribute('data-wei'))!)).toBe(onChain);
    expect(await amount.textContent()).toMatch(/^[\d,]+(\.\d{1,4})? ETH · \$[\d,]+\.\d\d$/);
    await page.setViewportSize(PHONE);
    try {
      expect(await cellsInView(panel.getByTestId('senders').locator('tbody tr').first())).toEqual([]);
    } finally {
      await page.setViewportSize(WIDE);
    }
    await shot('health-senders');
  });

  it('answers "Would this be sponsored?" in ETH and shows every column of a rule on a phone', async () => {
    const [rule] = await dbRows<{ id: number }>('SELECT id FROM gas_sponsors WHERE project_id = $1', [projectId]);
    // A daily cap of 1 000 000 000 wei (0.000000001 ETH): any transfer is over it.
    await admin('UpdateGasSponsor', { projectId, id: rule.id, dailyCapWei: '1000000000' });
    expect((await dbRows<{ cap: string }>('SELECT daily_cap_wei::text AS cap FROM gas_sponsors WHERE id = $1', [rule.id]))[0].cap).toBe('1000000000');
    await page.goto(`${env.baseUrl}/console/#/projects/${projectId}/sponsors`);
    await page.getByTestId('check-wallet').fill(newSigner().address);
    await page.getByTestId('check-target').fill(env.token);
    await page.getByTestId('check-value').fill('0.5');
    expect(await page.getByTestId('check-value-hint').textContent()).toBe('= 500,000,000,000,000,000 wei ≈ $1,000.00');
    await page.getByTestId('check-value').fill('');
    await page.getByTestId('check-gas').fill('60000');
    await page.getByTestId('check').click();
    const result = page.getByTestId('check-result');
    await expect.poll(() => result.textContent()).toMatch(/^Not sponsored: /);
    const text = (await result.textContent())!;
    // The cap as the database holds it, in ETH; no figure left in wei.
    expect(text).toMatch(/\(\d\.\d+ ETH of 0\.000000001 ETH spent, this needs \d\.\d+ ETH\)/);
    expect(text).not.toMatch(/\d wei/);
    expect(await result.locator('[data-wei="1000000000"]').count()).toBe(1);
    await page.setViewportSize(PHONE);
    try {
      expect(await cellsInView(page.getByTestId('sponsors').locator('tbody tr').first())).toEqual([]);
    } finally {
      await page.setViewportSize(WIDE);
    }
    await shot('sponsorship-check');
  });

  it('lists the fee tokens on a phone as a card a token, each value under its column name', async () => {
    const { networks } = (await admin('FeeTokens', {})) as { networks: Array<{ network: string; tokens: Array<{ symbol: string; contractAddress: string | null }> }> };
    const net = networks.find((n) => n.network === env.chain.chainConfig.name)!;
    // What the chain's relayer takes: the native currency and the FUSD token this file relays with.
    expect(net.tokens.map((t) => [t.symbol, t.contractAddress?.toLowerCase() ?? null])).toContainEqual(['FUSD', env.token.toLowerCase()]);
    await page.getByTestId('nav-fees').click();
    const table = page.getByTestId(`fees-${net.network}`);
    await table.locator('tbody tr').first().waitFor();
    await page.setViewportSize(PHONE);
    try {
      const rows = table.locator('tbody tr');
      expect(await rows.count()).toBe(net.tokens.length);
      for (let i = 0; i < net.tokens.length; i++) {
        const row = rows.nth(i);
        expect(await cellsInView(row)).toEqual([]);
        // Each value sits beside its column's name (the header row is not shown on a phone).
        const labelled = await row.evaluate((tr) => [...tr.querySelectorAll('td')].map((td) => [getComputedStyle(td, '::before').content, td.textContent!.trim()]));
        expect(labelled.map(([label]) => label)).toEqual(['"Symbol"', '"Name"', '"Decimals"', '"Contract"', '"Price (native per token)"', '"Source"']);
        expect(labelled[0]![1]).toBe(net.tokens[i]!.symbol);
        expect(labelled[3]![1].toLowerCase()).toBe(net.tokens[i]!.contractAddress?.toLowerCase() ?? 'native');
      }
      expect(await table.locator('thead').isVisible()).toBe(false);
      // Nothing of the network's panel (its payment address included) runs past the screen's edge.
      const cut = await table
        .locator('xpath=..')
        .evaluate((panel) => [panel, ...panel.querySelectorAll('*')].filter((e) => e.getBoundingClientRect().right > window.innerWidth + 0.5).map((e) => e.textContent!.trim().slice(0, 30)));
      expect(cut).toEqual([]);
    } finally {
      await page.setViewportSize(WIDE);
    }
    await shot('fee-tokens');
  });

  it("draws the spend axis in decimals and gives the project list's spend its unit", async () => {
    await page.goto(`${env.baseUrl}/console/#/projects/${projectId}/overview`);
    const chart = page.getByTestId('usage-spend-chart');
    await chart.waitFor();
    const [spend] = await dbRows<{ wei: string }>('SELECT coalesce(sum(cost_wei), 0)::text AS wei FROM meta_txn_usage_hourly WHERE project_id = $1', [projectId]);
    expect(BigInt(spend.wei)).toBeGreaterThan(0n);
    await expect.poll(() => chart.locator('text').allTextContents()).toContain('ETH');
    const ticks = (await chart.locator('text').allTextContents()).slice(0, 3);
    for (const t of ticks) expect(t).toMatch(/^\d+(\.\d+)?( gwei)?$/);
    await page.getByTestId('nav-projects').click();
    const cell = page.getByTestId(`totals-spend-${projectId}`);
    await expect.poll(() => cell.textContent()).toMatch(new RegExp(`^[\\d.]+ ETH on ${env.chain.chainConfig.name} · \\$`));
    await shot('projects-spend');
  });
});
