// Sponsorship policies (#18) on a real anvil: per rule a validity window, wallet allow/deny lists, a
// per-transaction cap, a per-wallet daily cap, a total budget, caps in wei or USD (priced by a Chainlink
// feed moved during the test), charged atomically at intake (two API stacks on one database, 24
// concurrent sends) and refunded when a meta-transaction is DROPPED. Every refusal is judged by ground
// truth: no row queued for the project, the senders' ETH unchanged, the stored charges.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { encodeFunctionData, type Address, type Hex } from 'viem';
import { privateKeyToAddress } from 'viem/accounts';
import type { FastifyInstance } from 'fastify';
import { parseConfig } from '../src/config/load.ts';
import { buildApp } from '../src/cli/app.ts';
import { spendCaps } from '../src/relayer/intake/spend-caps.ts';
import { createServices, type Services } from '../src/services.ts';
import { createLogger } from '../src/telemetry/logger.ts';
import { consoleClient, bearer } from './console/support.ts';
import { PAYEE, QUOTE_SECRET, SENDER_KEYS, erc20, startRelayerEnv, type RelayerEnv } from './support/relayer-env.ts';
import { rpc } from './support/service.ts';
import { newSigner, signedBundle, walletFor, type SequenceTestWallet } from './support/sequence-wallet.ts';
import { TEST_DB } from './support/env.ts';
import { startRawServer, startTokenChain, type RawServer, type TokenChain } from './support/token-chain.ts';
import { finalReceipt } from './support/meta-final.ts';

let chain: TokenChain;
let env: RelayerEnv;
let usdFeed: Address;
let approver: RawServer;
let approverMode: 'yes' | 'no' | 'hang' = 'no';
const asked: Array<{ auth: string | undefined; body: any }> = [];

const usd = (dollars: number) => BigInt(Math.round(dollars * 1e8));
/** The relayer settings both API stacks run with (relayer-env's fee tokens, plus the native/USD feed). */
const relayerSettings = () => ({ nativeUsdFeed: { feed: usdFeed, heartbeatSec: 3_600 }, queueTimeoutSec: 2, maxQueuedPerKey: 1_000 });
const senders = SENDER_KEYS.map((k) => privateKeyToAddress(k));
const senderEth = async () => (await Promise.all(senders.map((a) => env.public.getBalance({ address: a })))).reduce((a, b) => a + b, 0n);
const admin = () => ({ authorization: `Bearer ${env.adminToken}` });

beforeAll(async () => {
  chain = await startTokenChain();
  // ETH/USD, 8 decimals, $2 000: the price source of caps in USD.
  [usdFeed] = await chain.deploy([{ contract: 'DevAggregator', args: [8, usd(2000)] }]);
  env = await startRelayerEnv({
    chain,
    relayer: relayerSettings(),
    webhooks: { approvalDeadlineMs: 500 },
  });
  approver = await startRawServer((req, res) => {
    const chunks: Buffer[] = [];
    req.on('data', (c) => chunks.push(c));
    req.on('end', () => {
      asked.push({ auth: req.headers.authorization, body: JSON.parse(Buffer.concat(chunks).toString('utf8')) });
      if (approverMode === 'yes') res.writeHead(200, { 'content-type': 'application/json' }).end('{"sponsor": true}');
      else if (approverMode === 'no') res.writeHead(200, { 'content-type': 'application/json' }).end('{"sponsor": false}');
      // 'hang': never answers.
    });
  });
}, 180_000);
afterAll(async () => {
  await env?.close();
  await approver?.stop();
  await chain?.stop();
});

async function newProject() {
  const p = await env.services.projects.create(`pol-${Math.random().toString(36).slice(2, 8)}`);
  const { key } = await env.services.accessKeys.create(p.id, 'k');
  return { id: p.id, key };
}

async function addRule(projectId: number, fields: Record<string, unknown> = {}) {
  const r = await env.call('AddGasSponsor', { projectId, address: env.token, kind: 'CONTRACT', ...fields }, admin());
  expect(r.status, JSON.stringify(r.body)).toBe(200);
  return r.body.gasSponsor as { id: number } & Record<string, any>;
}
const update = (projectId: number, id: number, fields: Record<string, unknown>) => env.call('UpdateGasSponsor', { projectId, id, ...fields }, admin());

const transferData = (to: Address, amount: bigint) => encodeFunctionData({ abi: erc20, functionName: 'transfer', args: [to, amount] });

/** A bundle of a wallet moving 1 FUSD (the wallet deployed by it unless `deployed`). */
async function bundle(w: { key: Hex; wallet: SequenceTestWallet }, opts: { nonce?: bigint; deployed?: boolean; space?: bigint } = {}) {
  return signedBundle({
    signerKey: w.key,
    wallet: w.wallet,
    chainId: env.chainId,
    txs: [{ to: env.token, data: transferData(newSigner().address, 1n) }],
    deployed: opts.deployed ?? false,
    nonce: { space: opts.space ?? 0n, n: opts.nonce ?? 0n },
  });
}
async function user() {
  const s = newSigner();
  const u = { key: s.privateKey, wallet: walletFor(s.address) };
  await env.chain.send([{ address: env.token, contract: 'DevERC20', functionName: 'mint', args: [u.wallet.address, 1_000n] }]);
  return u;
}
type Bundle = Awaited<ReturnType<typeof bundle>>;
const send = (u: { wallet: SequenceTestWallet }, b: Bundle, key: string, via: (m: string, body: unknown, h: Record<string, string>) => Promise<{ status: number; body: any }> = env.call) =>
  via('SendMetaTxn', { call: { walletAddress: u.wallet.address, contract: b.entrypoint, input: b.input } }, { 'x-access-key': key });
const feeOptions = (u: { wallet: SequenceTestWallet }, b: Bundle, key: string) => env.call('FeeOptions', { wallet: u.wallet.address, to: b.entrypoint, data: b.input }, { 'x-access-key': key });

/** What the database holds for a project: meta-transactions, and the charges of a rule. */
const rowsOf = async (projectId: number) =>
  (await env.services.db.query<{ id: string; status: string; sponsored: boolean }>('SELECT id, status, sponsored FROM meta_txns WHERE project_id = $1', [projectId])).rows;
const chargesOf = async (ruleId: number) =>
  (
    await env.services.db.query<{ meta_txn_id: string; wei: string; usd: string; refunded_at: Date | null }>(
      'SELECT meta_txn_id, wei::text AS wei, usd::text AS usd, refunded_at FROM sponsor_charges WHERE sponsor_id = $1 ORDER BY id',
      [ruleId],
    )
  ).rows;
const ruleOf = async (projectId: number, id: number) => (await env.call('GetGasSponsor', { projectId, id }, admin())).body.gasSponsor;

const final = (id: string) => finalReceipt(env, id);

/**
 * A refusal judged by ground truth: SendMetaTxn answers 402 naming the limit, FeeOptions says not
 * sponsored naming the same limit, and nothing was queued for the project nor paid by the senders.
 */
async function refused(p: { id: number; key: string }, u: Awaited<ReturnType<typeof user>>, b: Bundle, limit: string) {
  const before = { rows: (await rowsOf(p.id)).length, eth: await senderEth() };
  const fo = await feeOptions(u, b, p.key);
  expect(fo.status, JSON.stringify(fo.body)).toBe(200);
  expect(fo.body.sponsored).toBe(false);
  expect(fo.body.sponsorship.stoppedBy?.limit, JSON.stringify(fo.body.sponsorship)).toBe(limit);
  const r = await send(u, b, p.key);
  expect(r.status, JSON.stringify(r.body)).toBe(402);
  expect(r.body.error).toBe('InsufficientFee');
  expect(r.body.cause).toContain(fo.body.sponsorship.stoppedBy.reason.split(' (')[0]);
  expect((await rowsOf(p.id)).length).toBe(before.rows);
  expect(await senderEth()).toBe(before.eth);
  return fo.body.sponsorship;
}

/** Sponsored and mined. FeeOptions is asked too unless `quoteFirst` is false (its gas estimate is above intake's, so near a cap it may say no first). */
async function accepted(p: { id: number; key: string }, u: Awaited<ReturnType<typeof user>>, b: Bundle, ruleId: number, quoteFirst = true) {
  if (quoteFirst) {
    const fo = await feeOptions(u, b, p.key);
    expect(fo.body.sponsorship, JSON.stringify(fo.body)).toMatchObject({ sponsored: true, ruleIds: [ruleId], stoppedBy: null });
  }
  const r = await send(u, b, p.key);
  expect(r.status, JSON.stringify(r.body)).toBe(200);
  expect((await final(r.body.txnHash)).status).toBe('SUCCEEDED');
  return r.body.txnHash as string;
}

describe('policy fields on the wire', () => {
  it('stores and returns every field beside the Sequence GasSponsor shape, clears with "", and refuses bad input without writing anything', async () => {
    const p = await newProject();
    const allow = newSigner().address;
    const rule = await addRule(p.id, {
      dailyCapWei: '1000',
      dailyCapUsd: '2.5',
      walletDailyCapWei: '100',
      walletDailyCapUsd: 0.25,
      txnCapWei: '50',
      txnCapUsd: '0.01',
      totalBudgetWei: '100000',
      totalBudgetUsd: '12',
      validFrom: '2026-01-01T00:00:00Z',
      validUntil: '2030-01-01T00:00:00Z',
      allowWallets: [allow],
      denyWallets: [newSigner().address],
    });
    expect(rule).toMatchObject({
      gasTankId: 0,
      webhookUrl: '',
      dailyCapWei: '1000',
      dailyCapUsd: '2.5',
      walletDailyCapWei: '100',
      walletDailyCapUsd: '0.25',
      txnCapWei: '50',
      txnCapUsd: '0.01',
      totalBudgetWei: '100000',
      totalBudgetUsd: '12',
      validFrom: '2026-01-01T00:00:00.000Z',
      validUntil: '2030-01-01T00:00:00.000Z',
      allowWallets: [allow.toLowerCase()],
      spentTodayWei: '0',
      spentTotalWei: '0',
    });
    expect((await env.call('ListGasSponsors', { projectId: p.id }, admin())).body.gasSponsors[0]).toMatchObject({ id: rule.id, totalBudgetUsd: '12' });
    // One unit of a cap changed leaves the other; "" clears; [] clears a list.
    const u = await update(p.id, rule.id, { dailyCapWei: '', txnCapUsd: '', allowWallets: [], validFrom: '' });
    expect(u.body.gasSponsor).toMatchObject({ dailyCapWei: null, dailyCapUsd: '2.5', txnCapWei: '50', txnCapUsd: null, allowWallets: null, validFrom: null });

    const bad: Array<[Record<string, unknown>, RegExp]> = [
      [{ validFrom: '2030-01-01T00:00:00Z', validUntil: '2029-01-01T00:00:00Z' }, /validFrom .* must be before validUntil/],
      [{ allowWallets: [allow], denyWallets: [allow] }, /both the allow list and the deny list/],
      [{ totalBudgetWei: '-1' }, /decimal amount of wei/],
      [{ txnCapUsd: '1.0000000000000000001' }, /at most 18 fractional digits/],
      [{ denyWallets: ['0x12'] }, /20-byte/],
      [{ validUntil: 'tomorrow' }, /ISO 8601/],
      [{ allowWallets: Array.from({ length: 1_001 }, () => newSigner().address) }, /at most 1000/],
    ];
    for (const [fields, why] of bad) {
      const r = await env.call('AddGasSponsor', { projectId: p.id, address: newSigner().address, kind: 'CONTRACT', ...fields }, admin());
      expect(r.status, JSON.stringify(fields)).toBe(400);
      expect(r.body.error).toBe('InvalidArgument');
      expect(r.body.cause).toMatch(why);
      const up = await update(p.id, rule.id, fields);
      expect(up.status).toBe(400);
    }
    // A field the schema does not know is ignored, as Sequence's servers do, and named in the answer: a misspelt cap is seen not to apply.
    const misspelt = await update(p.id, rule.id, { dailyCapWie: '5' });
    expect(misspelt.status).toBe(200);
    expect(misspelt.body.ignoredFields).toEqual(['dailyCapWie']);
    expect(misspelt.body.gasSponsor).toMatchObject({ dailyCapWei: null });
    // Nothing half-written: still the one rule, as it was after the update.
    const after = (await env.call('ListGasSponsors', { projectId: p.id }, admin())).body.gasSponsors;
    expect(after).toHaveLength(1);
    expect(after[0]).toMatchObject({ dailyCapWei: null, dailyCapUsd: '2.5', validUntil: '2030-01-01T00:00:00.000Z', allowWallets: null });
  });
});

describe('limits that need no stored spend', () => {
  it('validity window: not before validFrom, not from validUntil', async () => {
    const p = await newProject();
    const u = await user();
    const b = await bundle(u);
    const rule = await addRule(p.id, { validFrom: new Date(Date.now() + 3_600_000).toISOString() });
    expect((await refused(p, u, b, 'notYetValid')).stoppedBy.ruleId).toBe(rule.id);
    await update(p.id, rule.id, { validFrom: '', validUntil: new Date(Date.now() - 1_000).toISOString() });
    await refused(p, u, b, 'expired');
    await update(p.id, rule.id, { validFrom: new Date(Date.now() - 60_000).toISOString(), validUntil: new Date(Date.now() + 3_600_000).toISOString() });
    await accepted(p, u, b, rule.id);
  });

  it('wallet allow and deny lists', async () => {
    const p = await newProject();
    const u = await user();
    const b = await bundle(u);
    const rule = await addRule(p.id, { allowWallets: [newSigner().address] });
    await refused(p, u, b, 'walletNotAllowed');
    await update(p.id, rule.id, { allowWallets: [u.wallet.address, newSigner().address], denyWallets: [] });
    const d = await user();
    await update(p.id, rule.id, { allowWallets: [], denyWallets: [d.wallet.address] });
    await refused(p, d, await bundle(d), 'walletDenied');
    // Another rule of the project that covers the same calls still sponsors a wallet the first one denies.
    const other = await env.call('AddGasSponsor', { projectId: p.id, address: d.wallet.address, kind: 'WALLET' }, admin());
    expect(other.status).toBe(200);
    await accepted(p, d, await bundle(d), other.body.gasSponsor.id);
    await accepted(p, u, b, rule.id);
  });

  it('per-transaction cap', async () => {
    const p = await newProject();
    const u = await user();
    const b = await bundle(u);
    const rule = await addRule(p.id, { txnCapWei: '1' });
    const stop = await refused(p, u, b, 'txnCap');
    expect(stop.reason).toMatch(/caps one meta-transaction at 1 wei; this costs \d+ wei/);
    await update(p.id, rule.id, { txnCapWei: (10n ** 17n).toString() });
    await accepted(p, u, b, rule.id);
  });
});

describe('budgets charged at intake', () => {
  it('per-wallet daily cap: a wallet stops at its cap, another wallet goes on', async () => {
    // Both wallets deployed first under another project, so each bundle below has the same shape (and gas).
    const other = await newProject();
    const deployer = await addRule(other.id);
    const a = await user();
    const b = await user();
    for (const u of [a, b]) await accepted(other, u, await bundle(u), deployer.id, false);
    const p = await newProject();
    const rule = await addRule(p.id);
    const first = await accepted(p, a, await bundle(a, { nonce: 1n, deployed: true }), rule.id);
    const [charge] = await chargesOf(rule.id);
    const cost = BigInt(charge.wei);
    expect(cost).toBeGreaterThan(0n);
    // A send is charged its worst case (its gas limit at the most an attempt may offer per gas: twice the
    // gas price then, its cover) until it is mined and settled to its cost: room for one bundle like the
    // first per wallet, not for a second one of the same wallet.
    const row = (
      await env.services.db.query<{ gas_limit: string; gas_price_priced: string; cover_wei: string }>(
        'SELECT gas_limit::text AS gas_limit, gas_price_priced::text AS gas_price_priced, cover_wei::text AS cover_wei FROM meta_txns WHERE id = $1',
        [first.replace(/^0x/, '')],
      )
    ).rows[0];
    const worst = BigInt(row.cover_wei);
    expect(worst).toBe(BigInt(row.gas_limit) * BigInt(row.gas_price_priced) * 2n);
    expect(worst).toBeGreaterThan(cost);
    await update(p.id, rule.id, { walletDailyCapWei: ((worst * 21n) / 20n).toString() });
    const stop = await refused(p, a, await bundle(a, { nonce: 2n, deployed: true }), 'walletDailyCap');
    expect(stop.reason).toContain(a.wallet.address.toLowerCase());
    await accepted(p, b, await bundle(b, { nonce: 1n, deployed: true }), rule.id, false);
    await refused(p, b, await bundle(b, { nonce: 2n, deployed: true }), 'walletDailyCap');
    const charges = await chargesOf(rule.id);
    expect(charges).toHaveLength(2);
    const g = await ruleOf(p.id, rule.id);
    expect(BigInt(g.spentTodayWei)).toBe(charges.reduce((s, c) => s + BigInt(c.wei), 0n));
  });

  // The charge checks the limit under the rule's lock, in the statement sent with the COMMIT: the sends
  // decided together before any of them was charged, and only that check holds the line.
  it.each([
    { limit: 'total budget', field: 'totalBudgetWei', unit: 'wei' as const, cause: /total budget/ },
    { limit: 'daily spend cap', field: 'dailyCapWei', unit: 'wei' as const, cause: /daily spend cap/ },
    // The same checks in USD (the charge statement's $7, the cost at the feed's price), under the same race.
    { limit: 'total budget in USD', field: 'totalBudgetUsd', unit: 'usd' as const, cause: /total budget/ },
    { limit: 'daily spend cap in USD', field: 'dailyCapUsd', unit: 'usd' as const, cause: /daily spend cap/ },
  ])(
    '$limit: 24 concurrent sends through two API stacks on one database never charge past it, and every charge has its queued row',
    async ({ field, unit, cause }) => {
      const p = await newProject();
      const probe = await addRule(p.id);
      const first = await user();
      await accepted(p, first, await bundle(first), probe.id);
      const cost = BigInt((await chargesOf(probe.id))[0][unit]);
      await env.call('RemoveGasSponsor', { projectId: p.id, id: probe.id }, admin());
      // Room for about eight of the 24.
      const budget = cost * 8n + cost / 2n;
      // USD caps are written in dollars (18 decimals kept), charges are kept in atto-USD.
      const asText = unit === 'wei' ? budget.toString() : `${budget / 10n ** 18n}.${(budget % 10n ** 18n).toString().padStart(18, '0')}`;
      const rule = await addRule(p.id, { [field]: asText });

      const second = await secondStack();
      try {
        const users = await Promise.all(Array.from({ length: 24 }, () => user()));
        const bundles = await Promise.all(users.map((u) => bundle(u)));
        const before = (await rowsOf(p.id)).length;
        const answers = await Promise.all(users.map((u, i) => send(u, bundles[i], p.key, i % 2 ? env.call : second.call)));
        const ok = answers.filter((r) => r.status === 200);
        const no = answers.filter((r) => r.status !== 200);
        for (const r of no) {
          expect(r.status, JSON.stringify(r.body)).toBe(402);
          expect(r.body.cause).toMatch(cause);
        }
        expect(ok.length).toBeGreaterThan(0);
        expect(no.length).toBeGreaterThan(0);
        const charges = await chargesOf(rule.id);
        const charged = charges.reduce((s, c) => s + BigInt(c[unit]), 0n);
        expect(charged).toBeLessThanOrEqual(budget);
        expect(charges).toHaveLength(ok.length);
        const rows = (await rowsOf(p.id)).filter((r) => r.sponsored);
        expect(rows.length - before).toBe(ok.length);
        expect(new Set(charges.map((c) => c.meta_txn_id))).toEqual(new Set(ok.map((r) => r.body.txnHash)));
        for (const r of ok) expect((await final(r.body.txnHash)).status).toBe('SUCCEEDED');
        // Mined, each charge has moved to the cost on chain (with the status, in its transaction): read
        // once they are all final, the rule's counters are the sum of its charges. Read before, a charge
        // moved between the two reads (seen on PGlite).
        const settled = (await chargesOf(rule.id)).reduce((s, c) => s + BigInt(c[unit]), 0n);
        expect(settled).toBeLessThanOrEqual(charged);
        const g = await ruleOf(p.id, rule.id);
        if (unit === 'wei') {
          expect(g.spentTotalWei).toBe(settled.toString());
          expect(g.spentTodayWei).toBe(settled.toString());
        } else {
          expect(Number(g.spentTotalUsd)).toBeCloseTo(Number(settled) / 1e18, 12);
          expect(Number(g.spentTodayUsd)).toBeCloseTo(Number(settled) / 1e18, 12);
        }
      } finally {
        await second.close();
      }
    },
    240_000,
  );

  it('per-wallet daily cap: 8 sends of one wallet at once (nonce spaces 2..9, two API stacks) never charge the wallet past it', async () => {
    const p = await newProject();
    const rule = await addRule(p.id);
    const u = await user();
    await accepted(p, u, await bundle(u), rule.id);
    await accepted(p, u, await bundle(u, { space: 1n, deployed: true }), rule.id);
    const charges0 = await chargesOf(rule.id);
    const cost = BigInt(charges0[1].wei);
    const walletSpent = async () =>
      BigInt(
        (await env.services.db.query<{ wei: string }>('SELECT spent_wei::text AS wei FROM sponsor_wallet_spend WHERE sponsor_id = $1 AND wallet = $2', [rule.id, u.wallet.address.toLowerCase()]))
          .rows[0].wei,
      );
    // Room for about three more of the same cost: every send decides before any is charged, the charge's check holds the line.
    const cap = (await walletSpent()) + cost * 3n + cost / 2n;
    await update(p.id, rule.id, { walletDailyCapWei: cap.toString() });
    const second = await secondStack();
    try {
      const bundles = await Promise.all(Array.from({ length: 8 }, (_, i) => bundle(u, { space: BigInt(i + 2), deployed: true })));
      const answers = await Promise.all(bundles.map((b, i) => send(u, b, p.key, i % 2 ? env.call : second.call)));
      const ok = answers.filter((r) => r.status === 200);
      const no = answers.filter((r) => r.status !== 200);
      for (const r of no) {
        expect(r.status, JSON.stringify(r.body)).toBe(402);
        expect(r.body.cause).toMatch(/daily cap for wallet/);
      }
      expect(ok.length).toBeGreaterThan(0);
      expect(no.length).toBeGreaterThan(0);
      expect(await walletSpent()).toBeLessThanOrEqual(cap);
      const charges = await chargesOf(rule.id);
      expect(charges).toHaveLength(2 + ok.length);
      expect(new Set(charges.slice(2).map((c) => c.meta_txn_id))).toEqual(new Set(ok.map((r) => r.body.txnHash)));
      for (const r of ok) expect((await final(r.body.txnHash)).status).toBe('SUCCEEDED');
    } finally {
      await second.close();
    }
  }, 240_000);

  it('a wallet cap lost to a concurrent charge is refused in the same words as one seen before, naming the wallet', async () => {
    // The charge statement's own check failed (a concurrent send spent the room), and the rule read again
    // no longer shows the stop (the other charge was given back meanwhile): the reason is worded from
    // the charge. Under load this is how a burst's refusals came out ("daily cap for a wallet").
    const wallet = '0x00000000000000000000000000000000000000A1' as Address;
    const over = await spendCaps(env.services.db).overBudget(new Error('metarelay_over_budget:987654:walletDailyCap'), {
      chainId: env.chainId,
      metaTxnId: '0x01',
      ruleIds: [987654],
      wallets: [wallet],
      cost: { wei: 1n, usd: null },
    });
    expect(over?.message).toMatch(new RegExp(`daily cap for wallet ${wallet}`));
  });

  it("settles a mined charge to what the transaction actually cost: the receipt's gasUsed × effectiveGasPrice, on every counter", async () => {
    const p = await newProject();
    const rule = await addRule(p.id, { totalBudgetWei: (10n ** 17n).toString() });
    const u = await user();
    const b = await bundle(u);
    const id = await accepted(p, u, b, rule.id);
    const row = (await env.services.db.query<{ txn_hash: string }>('SELECT txn_hash FROM meta_txns WHERE id = $1', [id])).rows[0];
    const receipt = await env.public.getTransactionReceipt({ hash: `0x${row.txn_hash.replace(/^0x/, '')}` as Hex });
    // Alone in its transaction (sent one at a time), so its share is the whole receipt.
    const together = (await env.services.db.query<{ n: string }>('SELECT count(*)::text AS n FROM meta_txns WHERE txn_hash = $1', [row.txn_hash])).rows[0];
    expect(together.n).toBe('1');
    const actual = receipt.gasUsed * receipt.effectiveGasPrice;
    const [charge] = await chargesOf(rule.id);
    expect(BigInt(charge.wei)).toBe(actual);
    const g = await ruleOf(p.id, rule.id);
    expect(BigInt(g.spentTotalWei)).toBe(actual);
    expect(BigInt(g.spentTodayWei)).toBe(actual);
    const wallet = (
      await env.services.db.query<{ wei: string }>('SELECT spent_wei::text AS wei FROM sponsor_wallet_spend WHERE sponsor_id = $1 AND wallet = $2', [rule.id, u.wallet.address.toLowerCase()])
    ).rows[0];
    expect(BigInt(wallet.wei)).toBe(actual);
  });

  it('refunds a DROPPED meta-transaction: the charge is given back, the budget is whole again', async () => {
    const p = await newProject();
    const rule = await addRule(p.id, { totalBudgetWei: (10n ** 17n).toString() });
    const u = await user();
    await accepted(p, u, await bundle(u), rule.id);
    const spentBefore = (await ruleOf(p.id, rule.id)).spentTotalWei;
    const eth = await senderEth();
    // Nonce 2 while the wallet is at 1: queued, waits for nonce 1, and is dropped after queueTimeoutSec (2 s).
    const ahead = await bundle(u, { nonce: 2n, deployed: true });
    const r = await send(u, ahead, p.key);
    expect(r.status, JSON.stringify(r.body)).toBe(200);
    const charged = await ruleOf(p.id, rule.id);
    expect(BigInt(charged.spentTotalWei)).toBeGreaterThan(BigInt(spentBefore));
    expect(BigInt(charged.spentTodayWei)).toBe(BigInt(charged.spentTotalWei));
    expect((await final(r.body.txnHash)).status).toBe('DROPPED');
    const after = await ruleOf(p.id, rule.id);
    expect(after.spentTotalWei).toBe(spentBefore);
    expect(after.spentTodayWei).toBe(spentBefore);
    const charges = await chargesOf(rule.id);
    expect(charges.find((c) => c.meta_txn_id === r.body.txnHash)?.refunded_at).not.toBeNull();
    expect(await senderEth()).toBe(eth);
  });
});

describe('caps in USD', () => {
  const setUsd = async (dollars: number) => {
    await env.chain.send([{ address: usdFeed, contract: 'DevAggregator', functionName: 'updateAnswer', args: [usd(dollars)] }]);
    // The relayer reads the head at most once per pollMs (50 ms).
    await new Promise((res) => setTimeout(res, 120));
  };

  it('follow the native/USD feed: a bundle within the USD cap at $2 000 is over it at $20 000, and within it again at $2 000', async () => {
    const p = await newProject();
    const rule = await addRule(p.id);
    const a = await user();
    const id = await accepted(p, a, await bundle(a), rule.id);
    const [c] = await chargesOf(rule.id);
    // Charged in USD at the feed's price: wei × 2000.
    expect(BigInt(c.usd)).toBe(BigInt(c.wei) * 2000n);
    // A cap four times what a bundle like it is charged at intake (its cover: its gas limit at the max fee) at $2 000.
    const cover = (await env.services.db.query<{ cover_wei: string }>('SELECT cover_wei::text AS cover_wei FROM meta_txns WHERE id = $1', [id.replace(/^0x/, '')])).rows[0].cover_wei;
    const cap = BigInt(cover) * 2000n * 4n;
    const dollars = `${cap / 10n ** 18n}.${(cap % 10n ** 18n).toString().padStart(18, '0')}`;
    await update(p.id, rule.id, { txnCapUsd: dollars, dailyCapUsd: '1000' });
    await setUsd(20_000);
    const u = await user();
    const b = await bundle(u);
    const stop = await refused(p, u, b, 'txnCap');
    expect(stop.reason).toMatch(/\$/);
    await setUsd(2_000);
    await accepted(p, u, b, rule.id);
    const g = await ruleOf(p.id, rule.id);
    const charges = await chargesOf(rule.id);
    expect(Number(g.spentTodayUsd)).toBeCloseTo(Number(charges.reduce((s, x) => s + BigInt(x.usd), 0n)) / 1e18, 12);
  });

  it('refuse to sponsor when the feed has no trustworthy answer (fail closed), and sponsor again when it has', async () => {
    const p = await newProject();
    const rule = await addRule(p.id, { dailyCapUsd: '1000' });
    const u = await user();
    const b = await bundle(u);
    await setUsd(0);
    const stop = await refused(p, u, b, 'noUsdPrice');
    expect(stop.reason).toMatch(/no native\/USD price/);
    await setUsd(2_000);
    await accepted(p, u, b, rule.id);
  });
});

describe('CheckSponsorship', () => {
  const check = (projectId: number, fields: Record<string, unknown>) =>
    consoleClient(env.app)('CheckSponsorship', { projectId, chainID: env.chain.chainConfig.name, target: env.token, data: transferData(newSigner().address, 1n), ...fields }, bearer(env.adminToken));

  it('asks the approval webhook (stage "check") and says when it refused or timed out', async () => {
    const p = await newProject();
    const wallet = newSigner().address;
    const rule = await addRule(p.id, { webhookUrl: `${approver.url}/approve`, webhookAuthToken: 'hook-token' });
    approverMode = 'no';
    asked.length = 0;
    const no = await check(p.id, { wallet });
    expect(no.status, JSON.stringify(no.body)).toBe(200);
    expect(no.body).toMatchObject({ sponsored: false, rule: { id: rule.id }, stoppedBy: { ruleId: rule.id, limit: 'approval' } });
    expect(no.body.reason).toMatch(/approval webhook did not approve it \(its answer was not \{"sponsor": true\}\)/);
    expect(asked).toHaveLength(1);
    expect(asked[0]).toMatchObject({ auth: 'Bearer hook-token', body: { type: 'sponsorship.approval', stage: 'check', rule: { id: rule.id } } });
    expect(asked[0].body.wallet.toLowerCase()).toBe(wallet.toLowerCase());

    approverMode = 'hang';
    const late = await check(p.id, { wallet });
    expect(late.body).toMatchObject({ sponsored: false, stoppedBy: { limit: 'approval' } });
    expect(late.body.reason).toMatch(/did not approve it \(no answer within 500 ms\)/);

    approverMode = 'yes';
    const yes = await check(p.id, { wallet });
    expect(yes.body).toMatchObject({ sponsored: true, rule: { id: rule.id }, stoppedBy: null });
    expect(yes.body.reason).toMatch(/^covered by CONTRACT/);
  });

  it('names the first limit that stopped a rule, costing the call at gasLimit × the gas price', async () => {
    const p = await newProject();
    const wallet = newSigner().address;
    const rule = await addRule(p.id, { txnCapWei: '1000', maxGasLimit: 50_000 });
    expect((await check(p.id, { wallet })).body).toMatchObject({ sponsored: true, rule: { id: rule.id } });
    const big = await check(p.id, { wallet, gasLimit: 60_000 });
    expect(big.body).toMatchObject({ sponsored: false, stoppedBy: { ruleId: rule.id, limit: 'maxGasLimit' } });
    const costly = await check(p.id, { wallet, gasLimit: 40_000 });
    expect(costly.body).toMatchObject({ sponsored: false, stoppedBy: { ruleId: rule.id, limit: 'txnCap' } });
    await update(p.id, rule.id, { denyWallets: [wallet] });
    expect((await check(p.id, { wallet })).body.stoppedBy.limit).toBe('walletDenied');
  });
});

describe('console: the approval webhook of a rule', () => {
  it('sets and changes the URL and token; the token is never returned in clear, and the webhook receives it', async () => {
    const call = consoleClient(env.app);
    const p = await newProject();
    const add = await call(
      'AddGasSponsor',
      { projectId: p.id, chainID: env.chain.chainConfig.name, kind: 'CONTRACT', address: env.token, webhookUrl: `${approver.url}/a`, webhookAuthToken: 's3cret-token' },
      bearer(env.adminToken),
    );
    expect(add.status, JSON.stringify(add.body)).toBe(200);
    expect(add.body.gasSponsor).toMatchObject({ webhookUrl: `${approver.url}/a`, webhookAuthTokenSet: true });
    const id = add.body.gasSponsor.id;
    const listed = await call('ListGasSponsors', { projectId: p.id }, bearer(env.adminToken));
    expect(JSON.stringify(listed.body)).not.toContain('s3cret-token');
    expect(JSON.stringify(add.body)).not.toContain('s3cret-token');

    const changed = await call('UpdateGasSponsor', { projectId: p.id, id, webhookUrl: `${approver.url}/b`, webhookAuthToken: 'other-token' }, bearer(env.adminToken));
    expect(changed.body.gasSponsor).toMatchObject({ webhookUrl: `${approver.url}/b`, webhookAuthTokenSet: true });
    expect(JSON.stringify(changed.body)).not.toContain('other-token');
    approverMode = 'yes';
    asked.length = 0;
    const u = await user();
    await accepted(p, u, await bundle(u), id);
    expect(asked.map((x) => x.auth)).toContain('Bearer other-token');

    const cleared = await call('UpdateGasSponsor', { projectId: p.id, id, webhookUrl: '', webhookAuthToken: '' }, bearer(env.adminToken));
    expect(cleared.body.gasSponsor).toMatchObject({ webhookUrl: '', webhookAuthToken: '', webhookAuthTokenSet: false });
    const bad = await call('UpdateGasSponsor', { projectId: p.id, id, webhookUrl: 'file:///etc/passwd' }, bearer(env.adminToken));
    expect(bad.status).toBe(400);
  });
});

/**
 * A second API stack on the same database, as a second process would run it: its own services (on
 * PostgreSQL its own connection pool; PGlite is one process's, so there the handle is shared) and its
 * own HTTP server; no dispatcher.
 */
async function secondStack(): Promise<{ call: (m: string, body: unknown, h: Record<string, string>) => Promise<{ status: number; body: any }>; close(): Promise<void> }> {
  const cfg = parseConfig({
    allowPrivateNetworks: true,
    logLevel: 'silent',
    database: env.testDb.location,
    relayer: { quoteSecret: QUOTE_SECRET, anonymousRatePerSec: 10_000, anonymousBurst: 10_000 },
    chains: [
      {
        ...env.chain.chainConfig,
        watch: false,
        relayer: {
          senderKeys: SENDER_KEYS,
          paymentAddress: PAYEE,
          feeTokens: [
            { address: env.token, name: 'Fee USD', symbol: 'FUSD', decimals: 6, nativePrice: '0.0004' },
            { address: null, name: 'Ether', symbol: 'ETH', decimals: 18, nativePrice: '1' },
          ],
          pollMs: 50,
          ...relayerSettings(),
        },
      },
    ],
  });
  const services: Services = await createServices(cfg, { db: TEST_DB === 'pglite' ? env.testDb.db : undefined, migrate: false, log: createLogger('silent'), pollingIntervalMs: 50 });
  const app: FastifyInstance = await buildApp(services);
  await app.listen({ port: 0, host: '127.0.0.1' });
  const path = `/relayer/${env.chain.chainConfig.name}/rpc/Relayer/`;
  return {
    call: (m, body, h) => rpc(app, `${path}${m}`, body, h),
    async close() {
      await app.close();
      // A database handle passed in (PGlite's, shared) is left open: it is the first stack's.
      await services.close();
    },
  };
}
