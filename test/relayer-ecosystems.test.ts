// Ecosystem gas sponsors (Sequence's …EcosystemGasSponsor): a rule of an ecosystem sponsors the bundles
// of every project in it and of no other, with one policy and one spend for them all. Judged by ground
// truth: what was mined (receipts on chain), what was queued for each project, what the senders paid
// and the charges stored against the rule.
import { encodeFunctionData, type Address } from 'viem';
import { privateKeyToAddress } from 'viem/accounts';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { SENDER_KEYS, erc20, startRelayerEnv, type RelayerEnv } from './support/relayer-env.ts';
import { newSigner, signedBundle, walletFor, type SequenceTestWallet } from './support/sequence-wallet.ts';

let env: RelayerEnv;
const admin = () => ({ authorization: `Bearer ${env.adminToken}` });
const senders = SENDER_KEYS.map((k) => privateKeyToAddress(k));
const senderEth = async () => (await Promise.all(senders.map((a) => env.public.getBalance({ address: a })))).reduce((a, b) => a + b, 0n);

beforeAll(async () => {
  env = await startRelayerEnv({ relayer: { queueTimeoutSec: 5 } });
}, 180_000);
afterAll(async () => {
  await env?.close();
});

async function newProject(ecosystemId: number | null) {
  const p = await env.services.projects.create(`eco-${Math.random().toString(36).slice(2, 8)}`);
  if (ecosystemId != null) expect(await env.services.projects.setEcosystem(p.id, ecosystemId)).toBe(true);
  const { key } = await env.services.accessKeys.create(p.id, 'k');
  return { id: p.id, key };
}

type User = { key: `0x${string}`; wallet: SequenceTestWallet };
async function user(): Promise<User> {
  const s = newSigner();
  const u = { key: s.privateKey, wallet: walletFor(s.address) };
  await env.chain.send([{ address: env.token, contract: 'DevERC20', functionName: 'mint', args: [u.wallet.address, 1_000n] }]);
  return u;
}
const bundle = (u: User) =>
  signedBundle({
    signerKey: u.key,
    wallet: u.wallet,
    chainId: env.chainId,
    txs: [{ to: env.token, data: encodeFunctionData({ abi: erc20, functionName: 'transfer', args: [newSigner().address as Address, 1n] }) }],
    deployed: false,
    nonce: { space: 0n, n: 0n },
  });
const send = async (u: User, key: string) => {
  const b = await bundle(u);
  return env.call('SendMetaTxn', { call: { walletAddress: u.wallet.address, contract: b.entrypoint, input: b.input } }, { 'x-access-key': key });
};
const queued = async (projectId: number) => (await env.services.db.query('SELECT id FROM meta_txns WHERE project_id = $1', [projectId])).rows.length;
const charges = async (ruleId: number) =>
  (await env.services.db.query<{ meta_txn_id: string; wei: string }>('SELECT meta_txn_id, wei::text AS wei FROM sponsor_charges WHERE sponsor_id = $1 ORDER BY id', [ruleId])).rows;

async function mined(id: string) {
  for (let i = 0; i < 60; i++) {
    const r = await env.call('GetMetaTxnReceipt', { metaTxID: id });
    const st = r.body.receipt?.status;
    if (['SUCCEEDED', 'FAILED', 'PARTIALLY_FAILED', 'DROPPED'].includes(st)) return r.body.receipt;
  }
  throw new Error(`meta-transaction ${id} never reached a final status`);
}

/** Not sponsored: 402, nothing queued for the project, nothing paid by the senders. */
async function refused(p: { id: number; key: string }, u: User) {
  const before = { rows: await queued(p.id), eth: await senderEth() };
  const r = await send(u, p.key);
  expect(r.status, JSON.stringify(r.body)).toBe(402);
  expect(r.body.error).toBe('InsufficientFee');
  expect(await queued(p.id)).toBe(before.rows);
  expect(await senderEth()).toBe(before.eth);
  return r.body.cause as string;
}

describe('ecosystem gas sponsors', () => {
  let ecosystem: { id: number };
  let a: { id: number; key: string };
  let b: { id: number; key: string };
  let outsider: { id: number; key: string };
  let rule: Record<string, any>;

  it('are added, read, listed and changed through the ecosystem only, by the admin only', async () => {
    const missing = await env.call('AddEcosystemGasSponsor', { ecosystemId: 999_999, address: env.token, kind: 'CONTRACT' }, admin());
    expect(missing.status).toBe(404);
    expect(missing.body.cause).toMatch(/no ecosystem 999999/);

    ecosystem = await env.services.ecosystems.create(`eco-${Math.random().toString(36).slice(2, 8)}`);
    [a, b, outsider] = [await newProject(ecosystem.id), await newProject(ecosystem.id), await newProject(null)];
    expect((await env.services.ecosystems.getById(ecosystem.id))!.projectIds).toEqual([a.id, b.id]);

    // A project's key is not the admin.
    const asProject = await env.call('AddEcosystemGasSponsor', { ecosystemId: ecosystem.id, address: env.token, kind: 'CONTRACT' }, { 'x-access-key': a.key });
    expect(asProject.status).toBe(403);

    const added = await env.call('AddEcosystemGasSponsor', { ecosystemId: ecosystem.id, address: env.token, kind: 'CONTRACT', name: 'fusd for all', maxGasLimit: 500_000 }, admin());
    expect(added.status, JSON.stringify(added.body)).toBe(200);
    rule = added.body.gasSponsor;
    expect(rule).toMatchObject({
      ecosystemId: ecosystem.id,
      projectId: 0,
      chainId: env.chainId,
      address: env.token.toLowerCase(),
      name: 'fusd for all',
      active: true,
      kind: 'CONTRACT',
      maxGasLimit: 500_000,
      deletedAt: null,
    });

    const again = await env.call('AddEcosystemGasSponsor', { ecosystemId: ecosystem.id, address: env.token, kind: 'CONTRACT' }, admin());
    expect(again.status).toBe(409);
    expect(again.body.cause).toMatch(/the ecosystem already has a CONTRACT sponsorship/);

    const got = await env.call('GetEcosystemGasSponsor', { ecosystemId: ecosystem.id, id: rule.id }, admin());
    expect(got.body.gasSponsor).toEqual(rule);
    const list = await env.call('ListEcosystemGasSponsors', { ecosystemId: ecosystem.id }, admin());
    expect(list.body.gasSponsors.map((r: { id: number }) => r.id)).toEqual([rule.id]);
    expect(list.body.page).toMatchObject({ page: 1, more: false }); // the next page to ask for, as every list answers

    // Not a project's rule: the project methods do not reach it, nor do another ecosystem's.
    for (const [m, body] of [
      ['GetGasSponsor', { projectId: a.id, id: rule.id }],
      ['UpdateGasSponsor', { projectId: a.id, id: rule.id, active: false }],
      ['RemoveGasSponsor', { projectId: a.id, id: rule.id }],
      ['GetEcosystemGasSponsor', { ecosystemId: ecosystem.id + 1, id: rule.id }],
    ] as const) {
      const r = await env.call(m, body, admin());
      expect(r.status, m).toBe(404);
    }
    expect((await env.call('ListGasSponsors', { projectId: a.id }, admin())).body.gasSponsors).toEqual([]);

    const updated = await env.call('UpdateEcosystemGasSponsor', { ecosystemId: ecosystem.id, id: rule.id, name: 'renamed' }, admin());
    expect(updated.body.gasSponsor).toMatchObject({ id: rule.id, name: 'renamed', active: true, ecosystemId: ecosystem.id });
    const bad = await env.call('UpdateEcosystemGasSponsor', { ecosystemId: ecosystem.id, id: rule.id, txnCapWei: '-1' }, admin());
    expect(bad.status).toBe(400);
  });

  it('sponsor every project of the ecosystem and no other, charging one shared spend', async () => {
    const [ua, ub, uo] = [await user(), await user(), await user()];
    const sa = await send(ua, a.key);
    expect(sa.status, JSON.stringify(sa.body)).toBe(200);
    const sb = await send(ub, b.key);
    expect(sb.status, JSON.stringify(sb.body)).toBe(200);
    for (const id of [sa.body.txnHash, sb.body.txnHash]) expect((await mined(id)).status).toBe('SUCCEEDED');
    // On chain: each wallet was deployed and moved its token; it held no ETH and paid no fee token.
    for (const u of [ua, ub]) expect(await env.public.readContract({ address: env.token, abi: erc20, functionName: 'balanceOf', args: [u.wallet.address] })).toBe(999n);
    // Both charged to the one rule.
    expect((await charges(rule.id)).map((c) => c.meta_txn_id).sort()).toEqual([sa.body.txnHash, sb.body.txnHash].map((x: string) => x.replace(/^0x/, '')).sort());

    expect(await refused(outsider, uo)).toMatch(/not sponsored/);
  });

  it('share one budget: what one project spent is gone for the other', async () => {
    const spent = (await env.call('GetEcosystemGasSponsor', { ecosystemId: ecosystem.id, id: rule.id }, admin())).body.gasSponsor.spentTotalWei;
    expect(BigInt(spent)).toBeGreaterThan(0n);
    // The budget is what A and B already spent: nothing is left for either.
    await env.call('UpdateEcosystemGasSponsor', { ecosystemId: ecosystem.id, id: rule.id, totalBudgetWei: spent }, admin());
    expect(await refused(b, await user())).toMatch(/total budget/);
    await env.call('UpdateEcosystemGasSponsor', { ecosystemId: ecosystem.id, id: rule.id, totalBudgetWei: '' }, admin());
  });

  it('stop sponsoring a project that leaves the ecosystem, and everyone once removed', async () => {
    expect(await env.services.projects.setEcosystem(b.id, null)).toBe(true);
    expect(await refused(b, await user())).toMatch(/not sponsored/);

    const ok = await send(await user(), a.key);
    expect(ok.status, JSON.stringify(ok.body)).toBe(200);
    expect((await mined(ok.body.txnHash)).status).toBe('SUCCEEDED');

    const removed = await env.call('RemoveEcosystemGasSponsor', { ecosystemId: ecosystem.id, id: rule.id }, admin());
    expect(removed.body).toMatchObject({ status: true });
    expect((await env.call('RemoveEcosystemGasSponsor', { ecosystemId: ecosystem.id, id: rule.id }, admin())).status).toBe(404);
    expect(await refused(a, await user())).toMatch(/not sponsored/);
  });
});
