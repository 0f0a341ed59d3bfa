import { describe, expect, it } from 'vitest';
import { encodeFunctionData, parseAbi, type Address, type Hex } from 'viem';
import { rpc } from '../support/service.ts';
import { erc20, type RelayerEnv } from '../support/relayer-env.ts';
import { newSigner, signedBundle, walletFor } from '../support/sequence-wallet.ts';
import { bearer, type Call } from './support.ts';
import { consoleRelayerEnv } from '../support/console-env.ts';

let env: RelayerEnv;
let call: Call;
const admin = (method: string, body: unknown = {}) => call(method, body, bearer(env.adminToken));
const approveAbi = parseAbi(['function approve(address spender, uint256 amount) returns (bool)']);

consoleRelayerEnv((e, c) => {
  env = e;
  call = c;
});

async function newProject() {
  const p = await admin('CreateProject', { name: `p-${Math.random().toString(36).slice(2, 8)}` });
  const k = await admin('CreateAccessKey', { projectId: p.body.project.id, label: 'relay' });
  return { id: p.body.project.id as number, key: k.body.accessKey as string };
}

const addRule = async (projectId: number, kind: string, address: string, extra: Record<string, unknown> = {}) => {
  const r = await admin('AddGasSponsor', { projectId, chainID: env.chain.chainConfig.name, kind, address, name: `${kind} rule`, ...extra });
  expect(r.status, JSON.stringify(r.body)).toBe(200);
  return r.body.gasSponsor as { id: number; dailyCapWei: string | null; spentTodayWei: string };
};

const transferData = (to: Address, amount: bigint) => encodeFunctionData({ abi: erc20, functionName: 'transfer', args: [to, amount] });

async function sponsoredTransfer(key: string) {
  const s = newSigner();
  const wallet = walletFor(s.address);
  await env.chain.send([{ address: env.token, contract: 'DevERC20', functionName: 'mint', args: [wallet.address, 1_000n] }]);
  const b = await signedBundle({ signerKey: s.privateKey, wallet, chainId: env.chainId, txs: [{ to: env.token, data: transferData(newSigner().address, 10n) }], deployed: false });
  const send = () => env.call('SendMetaTxn', { call: { walletAddress: wallet.address, contract: b.entrypoint, input: b.input } }, { 'x-access-key': key });
  const feeOptions = () => env.call('FeeOptions', { wallet: wallet.address, to: b.entrypoint, data: b.input }, { 'x-access-key': key });
  return { b, send, feeOptions };
}

async function finalStatus(id: string) {
  for (let i = 0; i < 40; i++) {
    const r = await env.call('GetMetaTxnReceipt', { metaTxID: id });
    if (['SUCCEEDED', 'FAILED', 'PARTIALLY_FAILED', 'DROPPED'].includes(r.body.receipt.status)) return r.body.receipt;
  }
  throw new Error(`meta-transaction ${id} never reached a final status`);
}

describe('console: gas sponsors', () => {
  it('adds, lists, switches off and removes a rule of each kind, in the reference shape plus kind and network', async () => {
    const p = await newProject();
    for (const kind of ['WALLET', 'TOKEN', 'CONTRACT', 'ADDRESS', 'ANY']) await addRule(p.id, kind, env.token);
    const list = await admin('ListGasSponsors', { projectId: p.id });
    expect(list.body.gasSponsors.map((g: { kind: string }) => g.kind)).toEqual(['WALLET', 'TOKEN', 'CONTRACT', 'ADDRESS', 'ANY']);
    expect(list.body.gasSponsors[0]).toMatchObject({
      projectId: p.id,
      chainId: env.chainId,
      network: env.chain.chainConfig.name,
      address: env.token.toLowerCase(),
      active: true,
      gasTankId: 0,
      webhookUrl: '',
      dailyCapWei: null,
      spentTodayWei: '0',
    });
    const dup = await admin('AddGasSponsor', { projectId: p.id, chainID: String(env.chainId), kind: 'TOKEN', address: env.token });
    expect(dup.body.error).toBe('RequestConflict');

    const id = list.body.gasSponsors[2].id;
    const off = await admin('UpdateGasSponsor', { projectId: p.id, id, active: false, dailyCapWei: '1000' });
    expect(off.body.gasSponsor).toMatchObject({ active: false, dailyCapWei: '1000' });
    const cleared = await admin('UpdateGasSponsor', { projectId: p.id, id, dailyCapWei: '' });
    expect(cleared.body.gasSponsor.dailyCapWei).toBeNull();
    expect((await admin('RemoveGasSponsor', { projectId: p.id, id })).body).toEqual({ status: true });
    expect((await admin('ListGasSponsors', { projectId: p.id })).body.gasSponsors).toHaveLength(4);
    expect((await admin('RemoveGasSponsor', { projectId: p.id, id })).body.error).toBe('NotFound');
  });
});

describe('console: CheckSponsorship', () => {
  const wallet = newSigner().address;
  const other = newSigner().address;
  const check = (projectId: number, target: string, data?: Hex, value?: string, from = wallet) =>
    admin('CheckSponsorship', { projectId, chainID: env.chain.chainConfig.name, wallet: from, target, data, value });

  it('names the CONTRACT rule that covers any call to the contract', async () => {
    const p = await newProject();
    const rule = await addRule(p.id, 'CONTRACT', env.token);
    const yes = await check(p.id, env.token, encodeFunctionData({ abi: approveAbi, functionName: 'approve', args: [other, 1n] }));
    expect(yes.body).toMatchObject({ sponsored: true, rule: { id: rule.id, kind: 'CONTRACT' } });
    const no = await check(p.id, other, '0x');
    expect(no.body).toMatchObject({ sponsored: false, rule: null });
    expect(no.body.reason).toMatch(/no sponsorship covers/);
  });

  it('covers token moves but not other calls with a TOKEN rule', async () => {
    const p = await newProject();
    await addRule(p.id, 'TOKEN', env.token);
    expect((await check(p.id, env.token, transferData(other, 5n))).body.sponsored).toBe(true);
    expect((await check(p.id, env.token, encodeFunctionData({ abi: approveAbi, functionName: 'approve', args: [other, 1n] }))).body.sponsored).toBe(false);
  });

  it('covers every call of the wallet with a WALLET rule, and native transfers to the address with an ADDRESS rule', async () => {
    const p = await newProject();
    await addRule(p.id, 'WALLET', wallet);
    expect((await check(p.id, other, '0x1234')).body.sponsored).toBe(true);
    expect((await check(p.id, other, '0x1234', undefined, other)).body.sponsored).toBe(false);
    const q = await newProject();
    await addRule(q.id, 'ADDRESS', other);
    expect((await check(q.id, other, '0x', '1000')).body.sponsored).toBe(true);
    expect((await check(q.id, other, '0x1234', '1000')).body.sponsored).toBe(false);
  });

  it('says not sponsored when the rule is switched off, or its daily cap is used up', async () => {
    const p = await newProject();
    const rule = await addRule(p.id, 'CONTRACT', env.token);
    await admin('UpdateGasSponsor', { projectId: p.id, id: rule.id, active: false });
    expect((await check(p.id, env.token, '0x')).body).toMatchObject({ sponsored: false, reason: expect.stringMatching(/has an active sponsorship on this network/) });
    await admin('UpdateGasSponsor', { projectId: p.id, id: rule.id, active: true, dailyCapWei: '0' });
    expect((await check(p.id, env.token, '0x')).body).toMatchObject({ sponsored: false, reason: expect.stringMatching(/daily spend cap/) });
  });
});

describe('console: daily spend caps at relayer intake', () => {
  it('does not sponsor a bundle over the cap (it needs a fee), and counts what sponsored bundles spent', async () => {
    const p = await newProject();
    const rule = await addRule(p.id, 'CONTRACT', env.token, { dailyCapWei: '1' });

    const first = await sponsoredTransfer(p.key);
    const over = await first.send();
    expect(over.status, JSON.stringify(over.body)).toBe(402);
    expect(over.body.error).toBe('InsufficientFee');
    expect(over.body.cause).toMatch(/daily spend cap/);
    const fee = await first.feeOptions();
    expect(fee.body.sponsored).toBe(false);
    expect(fee.body.options.length).toBeGreaterThan(0);

    await admin('UpdateGasSponsor', { projectId: p.id, id: rule.id, dailyCapWei: '' });
    const ok = await first.send();
    expect(ok.status, JSON.stringify(ok.body)).toBe(200);
    expect((await finalStatus(first.b.id)).status).toBe('SUCCEEDED');
    const spent = BigInt((await admin('ListGasSponsors', { projectId: p.id })).body.gasSponsors[0].spentTodayWei);
    expect(spent).toBeGreaterThan(0n);

    // A cap exactly at today's spend leaves nothing for the next bundle...
    await admin('UpdateGasSponsor', { projectId: p.id, id: rule.id, dailyCapWei: spent.toString() });
    const second = await sponsoredTransfer(p.key);
    expect((await second.send()).status).toBe(402);
    // ...and one with room for it at the max fee it is charged until mined (the first's cover, with room
    // for the gas price to move) sponsors it again.
    const cover = (await env.services.db.query<{ cover_wei: string }>('SELECT cover_wei::text AS cover_wei FROM meta_txns WHERE id = $1', [first.b.id.replace(/^0x/, '')])).rows[0].cover_wei;
    await admin('UpdateGasSponsor', { projectId: p.id, id: rule.id, dailyCapWei: (spent + (BigInt(cover) * 3n) / 2n).toString() });
    expect((await second.send()).status).toBe(200);
    expect((await finalStatus(second.b.id)).status).toBe('SUCCEEDED');
  });
});

describe('console: allowed networks', () => {
  it("refuses a project's key on a network the project is not enabled for, on the relayer and the metadata API", async () => {
    const p = await newProject();
    const t = await sponsoredTransfer(p.key);
    const metadata = () => rpc(env.app, '/rpc/Metadata/GetContractInfo', { chainID: String(env.chainId), contractAddress: env.token }, { 'x-access-key': p.key });
    expect((await t.feeOptions()).status).toBe(200);
    expect((await metadata()).status).toBe(200);

    await admin('UpdateProject', { projectId: p.id, allowedChainIDs: ['mainnet'] });
    const fee = await t.feeOptions();
    expect(fee.status).toBe(403);
    expect(fee.body).toMatchObject({ error: 'InvalidChain', code: 1106 });
    const md = await metadata();
    expect(md.status).toBe(403);
    expect(md.body.error).toBe('PermissionDenied');
    const rest = await env.app.inject({ method: 'GET', url: `/tokens/${env.chain.chainConfig.name}/${env.token}`, headers: { 'x-access-key': p.key } });
    expect(rest.statusCode).toBe(403);
    // Searches across networks look only where the project may: the token on anvil is not found.
    const find = () => rpc(env.app, '/rpc/Metadata/FindContractInfo', { contractAddress: env.token }, { 'x-access-key': p.key });
    const search = () => rpc(env.app, '/rpc/Metadata/SearchContracts', { q: env.token }, { 'x-access-key': p.key });
    expect((await find()).body.contractInfoList).toEqual([]);
    expect((await search()).body.contractInfo).toEqual([]);

    await admin('UpdateProject', { projectId: p.id, allowedChainIDs: [String(env.chainId)] });
    expect((await t.feeOptions()).status).toBe(200);
    expect((await metadata()).status).toBe(200);
    expect((await find()).body.contractInfoList.map((c: { chainId: number }) => c.chainId)).toEqual([env.chainId]);
    expect((await search()).body.contractInfo.map((c: { chainId: number }) => c.chainId)).toEqual([env.chainId]);
  });
});

describe('console: activity, fee tokens, health', () => {
  it("lists a project's meta-transactions and shows one with its receipt and each broadcast attempt", async () => {
    const p = await newProject();
    await addRule(p.id, 'CONTRACT', env.token);
    const t = await sponsoredTransfer(p.key);
    expect((await t.send()).status).toBe(200);
    const final = await finalStatus(t.b.id);
    expect(final.status).toBe('SUCCEEDED');

    const list = await admin('GetMetaTransactions', { projectId: p.id });
    expect(list.body.transactions).toHaveLength(1);
    const tx = list.body.transactions[0];
    expect(tx).toMatchObject({ metaTxnID: t.b.id.slice(2).toLowerCase(), txnStatus: 'SUCCEEDED', txnHash: final.txnHash, isWhitelisted: true, network: env.chain.chainConfig.name });
    expect(tx.gasUsed).toBeGreaterThan(0);

    const detail = await admin('GetMetaTransaction', { chainID: String(env.chainId), metaTxID: t.b.id });
    expect(detail.status, JSON.stringify(detail.body)).toBe(200);
    expect(detail.body.receipt).toMatchObject({ status: 'SUCCEEDED', txnHash: final.txnHash });
    expect(JSON.parse(detail.body.receipt.txnReceipt).transactionHash).toBe(final.txnHash);
    expect(detail.body.attempts.length).toBeGreaterThan(0);
    expect(detail.body.attempts.find((a: { hash: string }) => a.hash === final.txnHash)).toMatchObject({ status: 'MINED', sender: expect.stringMatching(/^0x/) });
    expect(detail.body.bundles).toHaveLength(1);

    const missing = await admin('GetMetaTransaction', { chainID: String(env.chainId), metaTxID: '0x' + 'ab'.repeat(32) });
    expect(missing.body.error).toBe('NotFound');
  });

  it('lists refresh tasks with progress and per-token failures', async () => {
    env.services.startBackground();
    const p = await newProject();
    // An ERC20 has no token URIs: each token fails for good, with its reason.
    const r = await rpc(env.app, '/rpc/Metadata/EnqueueTokensForRefresh', { chainID: String(env.chainId), contractAddress: env.token, tokenIDs: ['1', '2'] }, { 'x-access-key': p.key });
    expect(r.status, JSON.stringify(r.body)).toBe(200);
    let task;
    for (let i = 0; i < 100; i++) {
      task = (await admin('ListTasks', { projectId: p.id })).body.tasks[0];
      if (task.failed + task.succeeded === 2) break;
      await new Promise((res) => setTimeout(res, 100));
    }
    expect(task).toMatchObject({ id: r.body.taskId, total: 2, failed: 2, succeeded: 0, contractAddress: env.token.toLowerCase() });
    expect(task.failures.map((f: { item: string }) => f.item).sort()).toEqual(['1', '2']);
    expect(task.failures[0].reason).toBeTruthy();
  });

  it('shows fee tokens with their prices, and per network the head, senders, queue and the share included within 3 blocks', async () => {
    const fees = await admin('FeeTokens');
    expect(fees.body.networks[0]).toMatchObject({ chainId: env.chainId, isFeeRequired: true });
    expect(fees.body.networks[0].tokens.map((t: { symbol: string; nativePrice: string }) => [t.symbol, t.nativePrice])).toEqual([
      ['FUSD', '0.0004'],
      ['ETH', '1'],
    ]);
    const health = await admin('Health');
    const n = health.body.networks[0];
    expect(n).toMatchObject({ chainId: env.chainId, ok: true });
    expect(n.head.number).toBeGreaterThan(0);
    expect(n.head.number).toBeLessThanOrEqual(Number(await env.public.getBlockNumber()));
    expect(n.relayer.senders).toHaveLength(2);
    expect(n.relayer.senders[0].etherBalance).toBeGreaterThan(0);
    expect(n.relayer.queue).toEqual({ queued: 0, sent: 0 });
    // Everything relayed by this file was mined at once (automine): all within 3 blocks.
    expect(n.relayer.inclusion.mined).toBeGreaterThan(0);
    expect(n.relayer.inclusion).toMatchObject({ within: n.relayer.inclusion.mined, blocks: 3 });
  });

  it('stops and starts a sender from the health page; an unknown sender or network is a clear error', async () => {
    const chainID = String(env.chainId);
    const stopped = await admin('StopSender', { chainID, index: 1 });
    expect(stopped.status, JSON.stringify(stopped.body)).toBe(200);
    let senders = (await admin('Health')).body.networks[0].relayer.senders;
    expect(senders.map((x: { enabled: boolean }) => x.enabled)).toEqual([true, false]);
    expect(Date.parse(senders[1].stoppedAt)).not.toBeNaN();
    // The relayer's own RuntimeStatus sees the same flag.
    expect((await env.call('RuntimeStatus', {}, { 'x-access-key': env.accessKey })).body.status.senders[1].enabled).toBe(false);
    expect((await admin('StartSender', { chainID, index: 1 })).status).toBe(200);
    senders = (await admin('Health')).body.networks[0].relayer.senders;
    expect(senders.map((x: { stoppedAt: string | null }) => x.stoppedAt)).toEqual([null, null]);

    const unknown = await admin('StopSender', { chainID, index: 9 });
    expect(unknown.status).toBe(400);
    expect(unknown.body.cause).toMatch(/no sender 9/);
    const network = await admin('StopSender', { chainID: 'nowhere', index: 0 });
    expect(network.status).toBe(400);
    expect(network.body.error).toBe('ChainNotFound');
    expect((await call('StopSender', { chainID, index: 0 })).status).toBe(401);
  });
});

describe('console: unpaid fees', () => {
  it('shows each shortfall and who is barred on the Health page, and lifts a bar', async () => {
    const wallet = newSigner().address.toLowerCase();
    const contract = newSigner().address.toLowerCase();
    await env.services.bars.record(env.services.db, [
      {
        chainId: env.chainId,
        metaTxnId: 'ab'.repeat(32),
        wallet,
        keyId: 4242,
        clientIp: '203.0.113.9',
        clientNet: '203.0.113.0/24',
        feeToken: env.token.toLowerCase(),
        owed: 500n,
        received: 0n,
        contracts: [contract],
      },
    ]);
    // Barred where it came from (its network and wallet under its key) and the contract it called, not the key.
    const unpaid = (await admin('Health')).body.networks[0].relayer.unpaid;
    expect(unpaid.bars.map((b: { kind: string; value: string }) => `${b.kind}:${b.value}`).sort()).toEqual([`contract:${contract}`, 'key-client:4242|203.0.113.0/24', `key-wallet:4242|${wallet}`]);
    expect(unpaid.bars[0]).toMatchObject({ metaTxnId: 'ab'.repeat(32), owed: '500', received: '0' });

    expect((await admin('LiftRelayBar', { kind: 'key-wallet', value: `4242|${wallet}` })).status).toBe(200);
    const after = (await admin('Health')).body.networks[0].relayer.unpaid.bars;
    expect(after.map((b: { kind: string }) => b.kind).sort()).toEqual(['contract', 'key-client']);
    const again = await admin('LiftRelayBar', { kind: 'key-wallet', value: `4242|${wallet}` });
    expect(again.status).toBe(400);
    expect(again.body.cause).toMatch(/no bar on key-wallet/);
    expect((await call('LiftRelayBar', { kind: 'key-client', value: '4242|203.0.113.0/24' })).status).toBe(401);
    expect((await admin('LiftRelayBar', { kind: 'key-client', value: '4242|203.0.113.0/24' })).status).toBe(200);
    await env.services.bars.lift('contract', contract);

    // A bar written before bars were per caller (kind ip): an IPv6 client is barred as its /64, any address of it names the bar to lift.
    await env.services.db.query(`INSERT INTO relay_bars (kind, value, chain_id, meta_txn_id, fee_token, owed, received) VALUES ('ip', '2001:db8:7:8::/64', $1, $2, NULL, 500, 0)`, [
      env.chainId,
      'cd'.repeat(32),
    ]);
    expect((await admin('LiftRelayBar', { kind: 'ip', value: '2001:db8:7:8:1234::9' })).status).toBe(200);
    expect((await env.services.db.query(`SELECT 1 FROM relay_bars WHERE kind = 'ip'`)).rows).toEqual([]);
  });
});
