// A project's request log and its alerts, in a real browser against a real metarelay on anvil: the
// requests a client made (counted by the client) listed with their status, latency and network and
// never the key, cut to the newest keepPerProject; a sponsorship rule near its daily cap and a balance
// near empty shown above the project's tabs, with one warn line each and the alert gauges in /metrics.
import pino from 'pino';
import type { Browser, Page } from 'playwright-core';
import { encodeFunctionData } from 'viem';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { erc20, startRelayerEnv, type RelayerEnv } from '../support/relayer-env.ts';
import { newSigner, signedBundle, walletFor } from '../support/sequence-wallet.ts';
import { waitFor } from '../support/relay-load.ts';
import { asOperator } from '../support/service.ts';
import { TEST_DB } from '../support/env.ts';
import { WIDE, launchBrowser, shot as shotOf, signIn } from './browser.ts';

const KEEP = 5;
let env: RelayerEnv;
let browser: Browser;
let page: Page;
const lines: { level: number; msg: string; alert?: string; ruleId?: number; projectId?: number }[] = [];

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
const newProject = async (name: string) => (await admin('CreateProject', { name: `${name}-${Math.random().toString(36).slice(2, 8)}` })).project.id as number;

beforeAll(async () => {
  env = await startRelayerEnv({
    log: pino({ level: 'info' }, { write: (l: string) => void lines.push(JSON.parse(l)) }),
    console: { requestLog: { keepPerProject: KEEP, flushMs: 100 }, alerts: { checkEverySec: 5 } },
  });
  browser = await launchBrowser();
  page = await browser.newPage({ viewport: WIDE });
  await signIn(page, env.baseUrl, env.adminToken);
}, 180_000);

afterAll(async () => {
  await browser?.close();
  await env?.close();
});

const shot = (name: string) => shotOf(page, name);

describe(`a project's request log and alerts (${TEST_DB})`, () => {
  it('lists the requests a client made, refused ones included, never the key, cut to the newest keepPerProject', async () => {
    const projectId = await newProject('requests');
    const key = (await admin('CreateAccessKey', { projectId, label: 'app' })).accessKey as string;
    // A key held to one request (burst 1, refilled every 100 s): its second is refused 429.
    const slow = await admin('CreateAccessKey', { projectId, label: 'slow', ratePerSec: 0.01, rateBurst: 1 });
    const sent: { key: string; method: string; status: number }[] = [];
    const call = async (k: string, method: string) => {
      const r = await env.call(method, {}, { 'x-access-key': k });
      sent.push({ key: k, method: `Relayer/${method}`, status: r.status });
    };
    for (let i = 0; i < 4; i++) await call(key, i % 2 ? 'Ping' : 'GetChainID');
    await call(slow.accessKey, 'Ping');
    await call(slow.accessKey, 'Ping');
    // What the client counted: 5 answered 200, the slow key's second 429.
    expect(sent.map((x) => x.status)).toEqual([200, 200, 200, 200, 200, 429]);
    const newest = sent.slice(-KEEP).reverse();
    // Written in batches: wait for the last one, then the table holds the newest KEEP rows of the project.
    await waitFor(
      'the request log written',
      async () => (await dbRows<{ status: number }>('SELECT status FROM project_requests WHERE project_id = $1 ORDER BY id DESC LIMIT 1', [projectId]))[0]?.status === 429,
    );
    const stored = await dbRows<Record<string, unknown>>('SELECT * FROM project_requests WHERE project_id = $1 ORDER BY id DESC', [projectId]);
    expect(stored.map((r) => [r.method, r.status])).toEqual(newest.map((x) => [x.method, x.status]));
    // Never the key: no column of any row holds either key or a part of it.
    const flat = JSON.stringify(stored);
    for (const k of [key, slow.accessKey]) expect(flat).not.toContain(k.slice(0, 12));

    await page.goto(`${env.baseUrl}/console/#/projects/${projectId}/requests`);
    await expect.poll(() => page.getByTestId('requests-count').textContent()).toBe(`1–${KEEP} of ${KEEP} requests`);
    const rows = page.getByTestId('requests').locator('tbody tr');
    expect(await rows.count()).toBe(KEEP);
    const first = (await rows.first().textContent())!;
    expect(first).toContain('Relayer/Ping');
    expect(first).toContain('429');
    expect(first).toContain(`#${slow.key.id}`);
    expect(first).toContain('127.0.0.0/24');
    expect(first).toMatch(/ms/);
    expect(first).toMatch(/GMT|UTC/);
    expect(await page.getByTestId('requests').locator('[data-testid="request-status"]').allTextContents()).toEqual(newest.map((x) => String(x.status)));
    expect(await page.locator('main').textContent()).not.toContain(key.slice(0, 12));
    await shot('request-log');
  });

  it('warns above the tabs, in the log and in /metrics as a daily cap is nearly spent and as a balance nears empty', async () => {
    const projectId = await newProject('alerts');
    const key = (await admin('CreateAccessKey', { projectId, label: 'app' })).accessKey as string;
    const rule = (await admin('AddGasSponsor', { projectId, chainID: String(env.chainId), kind: 'CONTRACT', address: env.token, name: 'FUSD' })).gasSponsor as { id: number };
    // A balance of 1 ETH, then one sponsored transfer debits it.
    await admin('AdjustProjectBalance', { projectId, chainID: String(env.chainId), amount: '1', identifier: 'start' });
    const s = newSigner();
    const wallet = walletFor(s.address);
    await env.chain.send([{ address: env.token, contract: 'DevERC20', functionName: 'mint', args: [wallet.address, 100n] }]);
    const data = encodeFunctionData({ abi: erc20, functionName: 'transfer', args: [newSigner().address, 40n] });
    const b = await signedBundle({ signerKey: s.privateKey, wallet, chainId: env.chainId, txs: [{ to: env.token, data }], deployed: false });
    const r = await env.call('SendMetaTxn', { call: { walletAddress: wallet.address, contract: b.entrypoint, input: b.input } }, { 'x-access-key': key });
    expect(r.status, JSON.stringify(r.body)).toBe(200);
    const id = b.id.replace(/^0x/, '').toLowerCase();
    await waitFor('the debit', async () => (await dbRows('SELECT 1 FROM gas_tank_ledger WHERE meta_txn_id = $1 AND kind = $2', [id, 'debit'])).length === 1, 60_000, 200);
    const [debit] = await dbRows<{ amount: string; balance: string }>(
      "SELECT (-amount_wei)::text AS amount, balance_wei::text AS balance FROM gas_tank_ledger WHERE meta_txn_id = $1 AND kind = 'debit'",
      [id],
    );
    // What the rule was charged for it, as the charges table holds it.
    const [spent] = await dbRows<{ wei: string }>('SELECT coalesce(sum(wei), 0)::text AS wei FROM sponsor_charges WHERE sponsor_id = $1 AND refunded_at IS NULL', [rule.id]);
    const cost = BigInt(debit.amount);
    const spentWei = BigInt(spent.wei);
    expect(spentWei).toBeGreaterThan(0n);
    // The cap: 10/9 of what was spent (90 % used); the balance: cut to 0.3 of the week's debit (2.1 days at its pace).
    await admin('UpdateGasSponsor', { projectId, id: rule.id, dailyCapWei: ((spentWei * 10n) / 9n).toString() });
    const cut = BigInt(debit.balance) - (cost * 3n) / 10n;
    const eth = (w: bigint) => `${w / 10n ** 18n}.${(w % 10n ** 18n).toString().padStart(18, '0')}`;
    await admin('AdjustProjectBalance', { projectId, chainID: String(env.chainId), amount: `-${eth(cut)}`, identifier: 'cut' });
    const [tank] = await dbRows<{ balance: string }>('SELECT balance_wei::text AS balance FROM gas_tank_ledger WHERE project_id = $1 ORDER BY id DESC LIMIT 1', [projectId]);
    expect(BigInt(tank.balance)).toBe((cost * 3n) / 10n);

    await page.goto(`${env.baseUrl}/console/#/projects/${projectId}/overview`);
    const alerts = page.getByTestId('alerts');
    await alerts.waitFor();
    expect(await page.getByTestId(`alert-sponsorCap-${rule.id}`).textContent()).toContain(`sponsorship ${rule.id} (CONTRACT FUSD) on ${env.chain.chainConfig.name} has spent 90% of its daily cap`);
    expect(await page.getByTestId(`alert-gasTank-${env.chainId}`).textContent()).toMatch(
      /Balance running low: the project's balance on \S+ \([\d.]+ ETH\) lasts about 2\.1 days at the last 7 days' spend/,
    );
    await shot('project-alerts');

    // The background check: one warn line per alert as it begins, and the gauges.
    env.services.startBackground();
    await waitFor('the alert lines', async () => lines.filter((l) => l.msg.startsWith('alert: ') && l.projectId === projectId).length === 2, 30_000, 100);
    expect(lines.find((l) => l.alert === 'sponsorCap' && l.projectId === projectId)).toMatchObject({ level: 40, ruleId: rule.id });
    const metrics = await (await fetch(`${env.baseUrl}/metrics`, { headers: asOperator })).text();
    expect(metrics).toMatch(/metarelay_alerts_active\{kind="sponsorCap"\} [1-9]/);
    expect(metrics).toMatch(/metarelay_alerts_active\{kind="gasTank"\} [1-9]/);
    expect(metrics).toMatch(/metarelay_alerts_raised_total\{kind="sponsorCap"\} [1-9]/);
  });
});
