// The relayer's money path, tried as an attacker would, judged by the chain: the payment address's
// balance, the senders' nonces (what they sent and paid gas for), and the stored rows.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createWalletClient, encodeFunctionData, http, maxUint256, pad, parseAbi, type Address, type Hex } from 'viem';
import { privateKeyToAccount } from 'viem/accounts';
import { SEQUENCE_V2_CONTEXT } from '../src/devchain/sequence.ts';
import { queueRow } from './support/meta-rows.ts';
import { waitFor } from './support/relay-load.ts';
import { feeKit } from './support/fee-kit.ts';
import { PAYEE, SENDER_KEYS, erc20, sponsor, startRelayerEnv, type RelayerEnv } from './support/relayer-env.ts';
import { newSigner, sequenceFactoryAbi, sequenceWalletAbi, signedBundle, type SequenceTx } from './support/sequence-wallet.ts';
import { finalReceipt } from './support/meta-final.ts';

let env: RelayerEnv;
let cheat: Address;

const SENDERS = SENDER_KEYS.map((k) => privateKeyToAccount(k).address);
const FEE = 10_000_000n; // 10 FUSD: well above the price of these bundles
const cheatAbi = parseAbi(['function payIfSimulated(address token, address payee, uint256 amount)', 'function drainIfReal(address token)', 'function burned() view returns (uint256)']);

beforeAll(async () => {
  env = await startRelayerEnv({ proxy: true, relayer: { maxQueuedPerWallet: 16 }, service: { maxReceiptWaitersPerAddress: 8 } });
  [cheat] = await env.chain.deploy([{ contract: 'TestSimulationCheat' }]);
  await mint(cheat, 1_000n * FEE);
}, 120_000);
afterAll(async () => {
  await env?.close();
});

const { key, user, mint, balance } = feeKit(() => env);
/** What the senders have sent (and paid gas for), on chain. */
const sent = async () => (await Promise.all(SENDERS.map((address) => env.public.getTransactionCount({ address })))).reduce((a, b) => a + b, 0);
const tokenCall = (fn: 'transfer' | 'approve', to: Address, amount: bigint, extra: Partial<SequenceTx> = {}): SequenceTx => ({
  to: env.token,
  data: encodeFunctionData({ abi: erc20, functionName: fn, args: [to, amount] }),
  ...extra,
});
const fee = (amount = FEE) => tokenCall('transfer', PAYEE, amount);

/** A guest-module call with these transactions (what anyone can send without a signature). */
function guestInput(txs: SequenceTx[]): Hex {
  const tuples = txs.map((t) => ({
    delegateCall: t.delegateCall ?? false,
    revertOnError: t.revertOnError ?? true,
    gasLimit: t.gasLimit ?? 0n,
    target: t.to,
    value: t.value ?? 0n,
    data: t.data ?? '0x',
  }));
  return encodeFunctionData({ abi: sequenceWalletAbi, functionName: 'execute', args: [tuples, 0n, '0x'] });
}

const deployOf = (imageHash: Hex): SequenceTx => ({
  to: SEQUENCE_V2_CONTEXT.factory,
  data: encodeFunctionData({ abi: sequenceFactoryAbi, functionName: 'deploy', args: [SEQUENCE_V2_CONTEXT.mainModule, imageHash] }),
  gasLimit: 100_000n,
});

async function send(wallet: Address, contract: Address, input: Hex, headers: Record<string, string> = {}) {
  return env.call('SendMetaTxn', { call: { walletAddress: wallet, contract, input } }, headers);
}

const final = (id: string) => finalReceipt(env, id, { headers: key(), tries: 40 });

async function stored(id: string) {
  const r = await env.services.db.query<Record<string, unknown>>('SELECT * FROM meta_txns WHERE id = $1', [id.replace(/^0x/, '').toLowerCase()]);
  return r.rows[0];
}

describe('fees are structural: a fee shown only to the simulator is no fee', () => {
  it('refuses a keyless guest call to a contract that merely has the execute selector and pays only in simulation; nothing is sent', async () => {
    const before = { sent: await sent(), payee: await balance(PAYEE) };
    const input = guestInput([
      { to: cheat, data: encodeFunctionData({ abi: sequenceWalletAbi, functionName: 'execute', args: [[], 0n, '0x'] }) },
      { to: cheat, data: encodeFunctionData({ abi: cheatAbi, functionName: 'payIfSimulated', args: [env.token, PAYEE, 50n * FEE] }) },
    ]);
    const r = await send(SEQUENCE_V2_CONTEXT.guestModule, SEQUENCE_V2_CONTEXT.guestModule, input);
    expect(r.status).toBeGreaterThanOrEqual(400);
    expect(r.status).toBeLessThan(500);
    expect(r.body.cause).toMatch(/Sequence wallet|pays no fee/);
    expect(await sent()).toBe(before.sent);
    expect(await balance(PAYEE)).toBe(before.payee);
  });

  it('refuses a signed wallet bundle whose "fee" another contract pays (only when simulated)', async () => {
    const u = user();
    const before = await sent();
    const b = await signedBundle({
      signerKey: u.key,
      wallet: u.wallet,
      chainId: env.chainId,
      txs: [{ to: cheat, data: encodeFunctionData({ abi: cheatAbi, functionName: 'payIfSimulated', args: [env.token, PAYEE, FEE] }) }],
      deployed: false,
    });
    const r = await send(u.wallet.address, b.entrypoint, b.input);
    expect(r.status).toBe(402);
    expect(r.body).toMatchObject({ error: 'InsufficientFee' });
    expect(await stored(b.id)).toBeUndefined();
    expect(await sent()).toBe(before);
  });

  it('checks the fee after inclusion: a fee drained away on chain is recorded as not received and bars the client network and wallet under the key, and the contract called', async () => {
    const u = user();
    await mint(u.wallet.address, 2n * FEE);
    const payee = await balance(PAYEE);
    // Approve the cheat, let it take everything when not simulated, then "pay" the fee: fine in every
    // simulation, reverted on chain. Its tell is state set just before the send (the block it was armed
    // in), which no simulation can hide; the tells of the relayer's own choosing are gone (simulation-tells.test.ts).
    const b = await signedBundle({
      signerKey: u.key,
      wallet: u.wallet,
      chainId: env.chainId,
      txs: [tokenCall('approve', cheat, maxUint256), { to: cheat, data: encodeFunctionData({ abi: cheatAbi, functionName: 'drainIfReal', args: [env.token] }) }, fee()],
      deployed: false,
    });
    await env.chain.send([{ address: cheat, contract: 'TestSimulationCheat', functionName: 'arm', args: [] }]);
    const r = await send(u.wallet.address, b.entrypoint, b.input, key());
    expect(r.status, JSON.stringify(r.body)).toBe(200);
    const receipt = await final(b.id);
    expect(receipt.status).toBe('FAILED');
    // Ground truth: the payment address got nothing, and the row says so.
    expect(await balance(PAYEE)).toBe(payee);
    const row = await stored(b.id);
    expect(String(row.fee_value)).toBe(FEE.toString());
    expect(String(row.fee_received)).toBe('0');
    const bars = await env.services.bars.list();
    // Barred where it came from (its client network and its wallet under its key) and the contract it
    // called, not the whole key: one stranger does not bar a dapp's public key (relayer-loss-budget.test.ts).
    expect(bars.map((x) => x.kind).sort()).toEqual(['contract', 'key-client', 'key-wallet']);
    expect(bars.find((x) => x.kind === 'key-wallet')!.value).toBe(`${row.key_id}|${u.wallet.address.toLowerCase()}`);
    expect(bars.find((x) => x.kind === 'contract')!.value).toBe(cheat.toLowerCase());

    // Another wallet from the same key and address that would pay is not relayed on credit any more…
    const v = user();
    await mint(v.wallet.address, 2n * FEE);
    const next = await signedBundle({ signerKey: v.key, wallet: v.wallet, chainId: env.chainId, txs: [fee()], deployed: false });
    const refused = await send(v.wallet.address, next.entrypoint, next.input, key());
    expect(refused.status).toBe(403);
    expect(refused.body.cause).toMatch(/barred from fee-paid relaying/);
    // …while a sponsored one still goes: the sponsor pays, not the relayer.
    const rule = await sponsor(env, 'WALLET', v.wallet.address);
    const ok = await send(v.wallet.address, next.entrypoint, next.input, key());
    expect(ok.status, JSON.stringify(ok.body)).toBe(200);
    expect((await final(next.id)).status).toBe('SUCCEEDED');
    await env.call('RemoveGasSponsor', { projectId: env.project.id, id: rule.id }, { authorization: `Bearer ${env.adminToken}` });
    for (const b of bars) await env.services.bars.lift(b.kind, b.value);
  });
});

describe('a gas limit only the node can size', () => {
  it('is refused, retryably, while the node gives no eth_estimateGas: nothing stored or sent; sent again once it does, it executes once', async () => {
    const u = user();
    await mint(u.wallet.address, FEE + 1n);
    const payee = await balance(PAYEE);
    const before = await sent();
    // A call with a gas limit of its own: the wallet demands that much left, far above what the bundle
    // burns, so the trial at the measured gas fails and only the node's estimate can size the limit.
    const b = await signedBundle({ signerKey: u.key, wallet: u.wallet, chainId: env.chainId, txs: [fee(), tokenCall('transfer', newSigner().address, 1n, { gasLimit: 600_000n })], deployed: false });
    const refuse = env.proxy!.addRule((c) => (c.method === 'eth_estimateGas' ? { kind: 'fail', message: 'request timed out' } : undefined));
    let refused: Awaited<ReturnType<typeof send>>;
    try {
      refused = await send(u.wallet.address, b.entrypoint, b.input);
    } finally {
      refuse();
    }
    // The relayer's Unavailable (2002), as Sequence answers it: the client may send it again.
    expect(refused.body.error, JSON.stringify(refused.body)).toBe('Unavailable');
    expect(refused.body.cause).toMatch(/no eth_estimateGas/);
    expect(await stored(b.id)).toBeUndefined();
    const accepted = await send(u.wallet.address, b.entrypoint, b.input);
    expect(accepted.status, JSON.stringify(accepted.body)).toBe(200);
    expect((await final(b.id)).status).toBe('SUCCEEDED');
    expect(await sent()).toBe(before + 1);
    expect(await balance(PAYEE)).toBe(payee + FEE);
  });
});

describe('one balance pays once', () => {
  it('relays one of two keyless bundles that each pay the whole balance in different nonce spaces; the other is refused, nothing is lost', async () => {
    const u = user();
    await mint(u.wallet.address, FEE);
    const payee = await balance(PAYEE);
    const before = await sent();
    const one = await signedBundle({ signerKey: u.key, wallet: u.wallet, chainId: env.chainId, txs: [fee()], nonce: { space: 1n, n: 0n }, deployed: false });
    const two = await signedBundle({ signerKey: u.key, wallet: u.wallet, chainId: env.chainId, txs: [fee()], nonce: { space: 2n, n: 0n }, deployed: false });
    const [a, b] = await Promise.all([send(u.wallet.address, one.entrypoint, one.input), send(u.wallet.address, two.entrypoint, two.input)]);
    const statuses = [a.status, b.status].sort();
    expect(statuses, JSON.stringify([a.body, b.body])).toEqual([200, 409]);
    const loser = a.status === 409 ? a : b;
    expect(loser.body.cause).toMatch(/one balance pays one fee at a time/);
    const winner = a.status === 200 ? one : two;
    expect((await final(winner.id)).status).toBe('SUCCEEDED');
    // The next nonce of the same space, sent while the first was live, would have been refused too; now it may go.
    expect(await balance(PAYEE)).toBe(payee + FEE);
    expect(await sent()).toBe(before + 1);
    expect(await balance(u.wallet.address)).toBe(0n);
  });
});

describe('sponsorship is judged by what really runs', () => {
  it('does not unfold an execute on a contract that is not a Sequence wallet: a CONTRACT rule on the token does not cover it', async () => {
    await sponsor(env, 'CONTRACT', env.token);
    const u = user();
    const before = await sent();
    // The calldata claims an inner bundle that only moves the sponsored token; the target is the cheat.
    const claimed = encodeFunctionData({
      abi: sequenceWalletAbi,
      functionName: 'execute',
      args: [
        [{ delegateCall: false, revertOnError: true, gasLimit: 0n, target: env.token, value: 0n, data: encodeFunctionData({ abi: erc20, functionName: 'transfer', args: [PAYEE, 0n] }) }],
        0n,
        '0x',
      ],
    });
    const b = await signedBundle({ signerKey: u.key, wallet: u.wallet, chainId: env.chainId, txs: [{ to: cheat, data: claimed }], deployed: false });
    const r = await send(u.wallet.address, b.entrypoint, b.input, key());
    expect(r.status).toBe(402);
    expect(r.body.cause).toMatch(new RegExp(`no sponsorship covers the call from ${u.wallet.address.toLowerCase()} to ${cheat.toLowerCase()}`));
    expect(await sent()).toBe(before);
  });

  it('does not let a WALLET rule cover a forged bundle swallowed by revertOnError=false', async () => {
    const victim = user();
    await sponsor(env, 'WALLET', victim.wallet.address);
    const impostor = newSigner();
    const forged = await signedBundle({ signerKey: impostor.privateKey, wallet: victim.wallet, chainId: env.chainId, txs: [tokenCall('transfer', PAYEE, 0n)], deployed: true });
    const input = guestInput([deployOf(victim.wallet.imageHash), { to: victim.wallet.address, data: forged.input, revertOnError: false }]);
    const before = await sent();
    const r = await send(victim.wallet.address, SEQUENCE_V2_CONTEXT.guestModule, input, key());
    expect(r.status).toBe(400);
    expect(r.body.cause).toMatch(/without running a bundle of it|Sequence wallet/);
    // The same with revertOnError=true is unfolded, and the forged signature fails the simulation.
    const strict = guestInput([deployOf(victim.wallet.imageHash), { to: victim.wallet.address, data: forged.input }]);
    const r2 = await send(victim.wallet.address, SEQUENCE_V2_CONTEXT.guestModule, strict, key());
    expect(r2.status).toBe(400);
    expect(r2.body).toMatchObject({ error: 'SimulationFailed' });
    expect(await sent()).toBe(before);
    expect(await env.public.getCode({ address: victim.wallet.address })).toBeUndefined();
  });

  it('refuses duplicate wallet deployments (each a failing deploy paid by the sponsor)', async () => {
    const u = user();
    await sponsor(env, 'WALLET', u.wallet.address);
    const b = await signedBundle({ signerKey: u.key, wallet: u.wallet, chainId: env.chainId, txs: [tokenCall('transfer', PAYEE, 0n)], deployed: true });
    const deploys = Array.from({ length: 30 }, () => ({ ...deployOf(u.wallet.imageHash), revertOnError: false }));
    const before = await sent();
    const r = await send(u.wallet.address, SEQUENCE_V2_CONTEXT.guestModule, guestInput([...deploys, { to: u.wallet.address, data: b.input }]), key());
    expect(r.status).toBe(400);
    expect(r.body.cause).toMatch(/deployed twice/);
    expect(await sent()).toBe(before);
  });

  it('holds a rule to its gas ceiling: a bundle over it is not sponsored', async () => {
    const u = user();
    const rule = await env.call('AddGasSponsor', { projectId: env.project.id, address: cheat, kind: 'CONTRACT', name: 'capped', maxGasLimit: 60_000 }, { authorization: `Bearer ${env.adminToken}` });
    expect(rule.status, JSON.stringify(rule.body)).toBe(200);
    expect(rule.body.gasSponsor.maxGasLimit).toBe(60_000);
    // payIfSimulated burns gas in the loop when not simulated, but the cap is judged on the simulated gas:
    // the cheat's execute burns ~200 loop iterations, well over 60 000 gas with the deployment.
    const b = await signedBundle({
      signerKey: u.key,
      wallet: u.wallet,
      chainId: env.chainId,
      txs: [{ to: cheat, data: encodeFunctionData({ abi: sequenceWalletAbi, functionName: 'execute', args: [[], 0n, '0x'] }) }],
      deployed: false,
    });
    const before = await sent();
    const r = await send(u.wallet.address, b.entrypoint, b.input, key());
    expect(r.status).toBe(402);
    expect(r.body.cause).toMatch(/ceiling of sponsorship/);
    expect(await sent()).toBe(before);
  });
});

describe('nobody stalls the queue', () => {
  it('refuses nonces far ahead of the wallet, and a wallet past its share of the queue', async () => {
    await sponsor(env, 'ADDRESS', PAYEE);
    const u = user();
    const far = await signedBundle({ signerKey: u.key, wallet: u.wallet, chainId: env.chainId, txs: [fee()], nonce: { space: 0n, n: 1000n }, deployed: false });
    const before = env.proxy!.calls.length;
    const r = await send(u.wallet.address, far.entrypoint, far.input);
    expect(r.status).toBe(400);
    expect(r.body.cause).toMatch(/too far ahead/);
    // Refused before any simulation: no probe call, no gas estimate.
    expect(env.proxy!.calls.slice(before).filter((c) => c.method === 'eth_estimateGas')).toHaveLength(0);

    // A deployed, sponsored wallet fills its share with bundles waiting on a missing nonce 0 of three
    // spaces (each within the window): past sixteen, the rest are refused.
    const w = user();
    await sponsor(env, 'WALLET', w.wallet.address);
    const pay = tokenCall('transfer', PAYEE, 0n);
    const deploy = await signedBundle({ signerKey: w.key, wallet: w.wallet, chainId: env.chainId, txs: [pay], deployed: false });
    expect((await send(w.wallet.address, deploy.entrypoint, deploy.input, key())).status).toBe(200);
    expect((await final(deploy.id)).status).toBe('SUCCEEDED');
    const bundles = [];
    for (const space of [1n, 2n, 3n])
      for (let n = 1n; n <= 6n; n++) bundles.push(await signedBundle({ signerKey: w.key, wallet: w.wallet, chainId: env.chainId, txs: [pay], nonce: { space, n }, deployed: true }));
    const results = [];
    for (const b of bundles) results.push(await send(w.wallet.address, b.entrypoint, b.input, key()));
    const refused = results.filter((x) => x.status !== 200);
    expect(refused.length, JSON.stringify(refused.map((x) => x.body.cause))).toBe(2);
    expect(refused[0].body.cause).toMatch(/already has 16 meta-transactions queued or in flight/);
  });

  it('relays a fresh sponsored bundle within a few blocks while 300 unready meta-transactions sit at the head of the queue', async () => {
    const repo = env.services.metaTxns;
    for (let i = 0; i < 300; i++) {
      const id = `dead${String(i).padStart(60, '0')}`;
      const wallet = `0x${(i + 1).toString(16).padStart(40, '0').replace(/^0/, 'b')}` as Address;
      await queueRow(repo, env.chainId, { id, wallet, nonce: 5n });
    }
    const victim = user();
    await sponsor(env, 'WALLET', victim.wallet.address);
    const b = await signedBundle({ signerKey: victim.key, wallet: victim.wallet, chainId: env.chainId, txs: [{ to: PAYEE, value: 0n }], deployed: false });
    const r = await send(victim.wallet.address, b.entrypoint, b.input, key());
    expect(r.status, JSON.stringify(r.body)).toBe(200);
    expect((await final(b.id)).status).toBe('SUCCEEDED');
    expect(await env.public.getCode({ address: victim.wallet.address })).not.toBeUndefined();
  });
});

describe('a wallet that leaves the main module', () => {
  /** anvil account 7: funded, not a relayer sender. */
  const OWNER_KEY: Hex = '0x4bbbf85ce3377467afe5d46f804f221813b2bb87f24d81f60f1fcdbf7cbf4356';
  const updateAbi = parseAbi(['function updateImplementation(address _implementation)']);

  it('is refused once its implementation is not a main module, although its proxy code is known: nothing is queued, nothing sent', async () => {
    const r = env.services.relayers.get(env.chainId)!;
    const u = user();
    const w = u.wallet.address;
    await sponsor(env, 'WALLET', w);
    const pay = tokenCall('transfer', PAYEE, 0n);
    // Deployed by a relayed bundle, then one more relayed: the relayer has seen its proxy code.
    for (const [space, deployed] of [
      [0n, false],
      [1n, true],
    ] as const) {
      const b = await signedBundle({ signerKey: u.key, wallet: u.wallet, chainId: env.chainId, txs: [pay], nonce: { space, n: 0n }, deployed });
      const ok = await send(w, b.entrypoint, b.input, key());
      expect(ok.status, JSON.stringify(ok.body)).toBe(200);
      expect((await final(b.id)).status).toBe('SUCCEEDED');
    }
    // Its owner switches it to the cheat (not a main module) with a signed self-call, sent directly.
    const sw = await signedBundle({
      signerKey: u.key,
      wallet: u.wallet,
      chainId: env.chainId,
      txs: [{ to: w, data: encodeFunctionData({ abi: updateAbi, functionName: 'updateImplementation', args: [cheat] }) }],
      nonce: { space: 2n, n: 0n },
      deployed: true,
    });
    const owner = createWalletClient({ account: privateKeyToAccount(OWNER_KEY), transport: http(env.rpcUrl) });
    const hash = await owner.sendTransaction({ to: w, data: sw.walletInput, chain: null });
    const receipt = await env.public.waitForTransactionReceipt({ hash });
    expect(receipt.status).toBe('success');
    expect(await env.public.getStorageAt({ address: w, slot: pad(w) })).toBe(pad(cheat.toLowerCase() as Hex));
    // The relayer has seen that block (the dispatcher's head): a known proxy whose slot it has not read
    // there, so intake reads it in the simulation itself.
    await waitFor('the relayer to observe the switch', async () => r.wallets.observed >= receipt.blockNumber);
    expect(r.wallets.slotUnknown(w.toLowerCase() as Address)).toBe(true);

    // Sponsored, and the cheat's execute runs fine in simulation: only the slot check refuses it.
    const before = { sent: await sent(), payee: await balance(PAYEE) };
    const b = await signedBundle({ signerKey: u.key, wallet: u.wallet, chainId: env.chainId, txs: [pay], nonce: { space: 3n, n: 0n }, deployed: true });
    const refused = await send(w, b.entrypoint, b.input, key());
    expect(refused.status, JSON.stringify(refused.body)).toBe(400);
    expect(refused.body).toMatchObject({ error: 'SimulationFailed' });
    expect(refused.body.cause).toMatch(/is not a Sequence v2 wallet of this relayer/);
    expect(await stored(b.id)).toBeUndefined();
    const rows = await env.services.db.query('SELECT id FROM meta_txns WHERE chain_id = $1 AND wallet = $2', [env.chainId, w.toLowerCase()]);
    expect(rows.rows).toHaveLength(2);
    // And stays refused in that block: the slot read is remembered, not read again.
    expect(r.wallets.slotUnknown(w.toLowerCase() as Address)).toBe(false);
    const again = await send(w, b.entrypoint, b.input, key());
    expect(again.body.cause).toMatch(/is not a Sequence v2 wallet of this relayer/);
    expect(await stored(b.id)).toBeUndefined();
    expect(await sent()).toBe(before.sent);
    expect(await balance(PAYEE)).toBe(before.payee);
  });
});

describe('anonymous callers are bounded', () => {
  it('refuses a keyless bundle that pays no fee without a single node call', async () => {
    const u = user();
    const b = await signedBundle({ signerKey: u.key, wallet: u.wallet, chainId: env.chainId, txs: [{ to: cheat, data: '0x12345678' }], deployed: false });
    // What intake would ask the node about this bundle: a simulation, an estimate, the wallet's code or
    // slot, each naming the wallet. (The dispatcher's own loop runs alongside: its per-block reads, such as
    // eth_gasPrice, name no wallet and are not this send's; counting them made the test fail at random.)
    const wallet = u.wallet.address.slice(2).toLowerCase();
    const from = env.proxy!.calls.length;
    const intake = () =>
      env.proxy!.calls.slice(from).filter((c) => ['eth_call', 'eth_estimateGas', 'eth_getCode', 'eth_getStorageAt'].includes(c.method) && JSON.stringify(c.params).toLowerCase().includes(wallet));
    const r = await send(u.wallet.address, b.entrypoint, b.input);
    expect(r.status).toBe(402);
    expect(intake()).toEqual([]);
  });

  it('holds at most the per-address cap of receipt waiters; the rest get the current status at once, and all wake on a change', async () => {
    const id = 'feed'.padEnd(64, '0');
    const wallet = '0x00000000000000000000000000000000000f00d1' as Address;
    await queueRow(env.services.metaTxns, env.chainId, { id, wallet, nonce: 7n });
    const done: string[] = [];
    const polls = Array.from({ length: 50 }, () => env.call('GetMetaTxnReceipt', { metaTxID: id }).then((r) => (done.push(r.body.receipt.status), r)));
    // The 42 over the cap answer at once with the current status…
    while (done.length < 42) await new Promise((res) => setTimeout(res, 20));
    expect(done.every((s) => s === 'QUEUED')).toBe(true);
    expect(env.services.receiptWaiters.size).toBe(8);
    // …and the 8 held ones wake together on the change, with the final status.
    await env.services.metaTxns.setStatus(env.services.db, env.chainId, id, { status: 'DROPPED', revert_reason: 'test' });
    env.services.relayEvents.emit(env.chainId, id);
    const all = await Promise.all(polls);
    expect(all.filter((r) => r.body.receipt.status === 'DROPPED')).toHaveLength(8);
    expect(env.services.receiptWaiters.size).toBe(0);
  });
});

describe('keyless callers share a bucket per client address', () => {
  let small: RelayerEnv;
  beforeAll(async () => {
    small = await startRelayerEnv({ service: { anonymousRatePerSec: 1, anonymousBurst: 5 } });
  }, 120_000);
  afterAll(async () => {
    await small?.close();
  });

  it('answers 429 with Retry-After past the burst, while a caller with a key is not affected', async () => {
    const results = [];
    for (let i = 0; i < 8; i++) results.push(await small.call('GetChainID', {}));
    expect(results.slice(0, 5).map((r) => r.status)).toEqual([200, 200, 200, 200, 200]);
    const limited = results.filter((r) => r.status === 429);
    expect(limited.length).toBeGreaterThanOrEqual(2);
    expect(limited[0].body).toMatchObject({ error: 'RateLimited', code: 1007 });
    expect(limited[0].body.cause).toMatch(/without an access key/);
    expect(Number(limited[0].headers['retry-after'])).toBeGreaterThanOrEqual(1);
    expect((await small.call('GetChainID', {}, { 'x-access-key': small.accessKey })).status).toBe(200);
  });

  it('counts an IPv6 caller by its /64: addresses of one network share a bucket, another network has its own, and its queued row records the network', async () => {
    const from = async (remoteAddress: string, method: string, body: unknown = {}) => {
      const r = await small.app.inject({
        method: 'POST',
        url: `${new URL(small.relayerUrl).pathname}/rpc/Relayer/${method}`,
        headers: { 'content-type': 'application/json' },
        payload: JSON.stringify(body),
        remoteAddress,
      });
      return { status: r.statusCode, body: r.json() };
    };
    // Five different addresses of 2001:db8:1:2::/64 spend its burst of 5; a sixth is refused.
    for (let i = 1; i <= 5; i++) expect((await from(`2001:db8:1:2:${i}::1`, 'GetChainID')).status).toBe(200);
    const over = await from('2001:db8:1:2:ffff:ffff:ffff:ffff', 'GetChainID');
    expect(over.status).toBe(429);
    expect(over.body.cause).toMatch(/from 2001:db8:1:2::\/64:/);
    // Another /64 has its own bucket; the queue's per-address share and the bars count the network.
    const u = user();
    await small.public.request({ method: 'anvil_setBalance' as never, params: [u.wallet.address, '0xde0b6b3a7640000'] as never });
    const b = await signedBundle({ signerKey: u.key, wallet: u.wallet, chainId: small.chainId, txs: [{ to: PAYEE, value: 10n ** 16n }], deployed: false });
    const r = await from('2001:db8:1:3:abcd::7', 'SendMetaTxn', { call: { walletAddress: u.wallet.address, contract: b.entrypoint, input: b.input } });
    expect(r.status, JSON.stringify(r.body)).toBe(200);
    const row = await small.services.db.query<{ client_ip: string }>('SELECT client_ip FROM meta_txns WHERE id = $1', [b.id.slice(2).toLowerCase()]);
    expect(row.rows[0].client_ip).toBe('2001:db8:1:3::/64');
  });

  it('the admin token is the operator, with its own bucket: 60 admin calls in a burst answer 200 (with a key beside or not), and the same address without it still gets its burst of 5', async () => {
    const from = async (method: string, body: unknown, headers: Record<string, string> = {}) =>
      (
        await small.app.inject({
          method: 'POST',
          url: `${new URL(small.relayerUrl).pathname}/rpc/Relayer/${method}`,
          headers: { 'content-type': 'application/json', ...headers },
          payload: JSON.stringify(body),
          remoteAddress: '198.51.100.60',
        })
      ).statusCode;
    const admin = { authorization: `Bearer ${small.adminToken}` };
    const burst = await Promise.all(Array.from({ length: 60 }, (_, i) => from('ListGasSponsors', { projectId: small.project.id }, i % 2 ? admin : { ...admin, 'x-access-key': small.accessKey })));
    expect(burst).toEqual(Array(60).fill(200));
    // The admin calls spent nothing of the address's bucket, and a caller there without a key is still bounded.
    const anon = [];
    for (let i = 0; i < 7; i++) anon.push(await from('GetChainID', {}));
    expect(anon).toEqual([200, 200, 200, 200, 200, 429, 429]);
  });
});
