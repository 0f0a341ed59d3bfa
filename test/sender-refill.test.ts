// Sender refill on a real anvil: a treasury key tops a sender that fell below minSenderBalance up to
// the target, once, recorded and shown in RuntimeStatus; an empty treasury refills nothing and says
// why. Judged by the chain: the sender's and treasury's balances and the transfer's receipt.

import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { parseEther, type Address, type Hex } from 'viem';
import { privateKeyToAccount } from 'viem/accounts';
import { rpcCall } from '../src/devchain/rpc.ts';
import { parseConfig } from '../src/config/load.ts';
import { maskedConfig } from '../src/config/mask.ts';
import { startRelayerEnv, type RelayerEnv } from './support/relayer-env.ts';
import { waitFor } from './support/relay-load.ts';

/** anvil's account 9: not a sender, not the deployer, not the load tests' funder. */
const TREASURY_KEY: Hex = '0x2a871d0798f97d79848a013d4936a73bf4cc922c825d33c1cf7073dff6d409c6';
const TREASURY = privateKeyToAccount(TREASURY_KEY).address;

let env: RelayerEnv;
let senders: Address[];

beforeAll(async () => {
  // Quiet senders read every second, not every 30 s: a balance set by the test is seen at the next block.
  env = await startRelayerEnv({ relayer: { minSenderBalance: '1', quietSenderReadMs: 1_000, refill: { treasuryKey: TREASURY_KEY, targetBalance: '2' } } });
  senders = env.services.relayers.get(env.chainId)!.senders;
}, 120_000);

afterAll(async () => {
  await env?.close();
});

const setBalance = (address: Address, wei: bigint) => rpcCall(env.rpcUrl, 'anvil_setBalance', [address, `0x${wei.toString(16)}`]);
const balance = (address: Address) => env.public.getBalance({ address });
const refillRows = async (sender: Address) =>
  (
    await env.services.db.query<{ status: string; hash: string; amount_wei: string; error: string | null }>(
      'SELECT status, hash, amount_wei::text AS amount_wei, error FROM sender_refills WHERE chain_id = $1 AND sender = $2 ORDER BY id',
      [env.chainId, sender.toLowerCase()],
    )
  ).rows;

/** Lets the dispatcher sweep a few more times (a sweep runs per block, and at least every 3 s). */
async function sweeps(n: number) {
  const d = env.services.dispatchers[0];
  for (let i = 0; i < n; i++) {
    const h = d.head;
    await rpcCall(env.rpcUrl, 'anvil_mine', ['0x1']);
    await waitFor('a sweep', async () => d.head > h, 20_000, 20);
  }
}

describe('sender refill from a treasury', () => {
  it('tops a sender below its floor up to the target, exactly once, recorded and shown in RuntimeStatus', async () => {
    const sender = senders[0];
    await setBalance(sender, parseEther('0.5'));
    const treasuryBefore = await balance(TREASURY);
    await waitFor('the sender refilled', async () => (await balance(sender)) === parseEther('2'), 30_000, 100);
    await sweeps(3);

    const rows = await refillRows(sender);
    expect(rows).toHaveLength(1);
    expect(rows[0]).toMatchObject({ status: 'MINED', amount_wei: parseEther('1.5').toString() });
    // The chain says who paid what: the treasury sent exactly the difference, and paid the gas itself.
    const tx = await env.public.getTransaction({ hash: rows[0].hash as Hex });
    const rc = await env.public.getTransactionReceipt({ hash: rows[0].hash as Hex });
    expect(tx.from.toLowerCase()).toBe(TREASURY.toLowerCase());
    expect(tx.to?.toLowerCase()).toBe(sender.toLowerCase());
    expect(tx.value).toBe(parseEther('1.5'));
    expect(await balance(TREASURY)).toBe(treasuryBefore - parseEther('1.5') - rc.gasUsed * rc.effectiveGasPrice);
    expect(await balance(sender)).toBe(parseEther('2'));
    // The other sender, above its floor, got nothing.
    expect(await refillRows(senders[1])).toEqual([]);

    const status = await env.call('RuntimeStatus', {}, { 'x-access-key': env.accessKey });
    expect(status.body.status.refills).toMatchObject({
      treasury: TREASURY,
      recent: [{ sender: sender.toLowerCase(), amountWei: parseEther('1.5').toString(), txnHash: rows[0].hash, status: 'MINED' }],
    });
    expect(status.body.status.senders[0]).toMatchObject({ belowFloor: false, enabled: true });
    const m = await env.services.metrics.registry.metrics();
    expect(m).toContain(`metarelay_relayer_sender_refills_total{chain="${env.chainId}",outcome="sent"} 1`);
    expect(m).toContain(`metarelay_relayer_sender_refills_total{chain="${env.chainId}",outcome="mined"} 1`);
    expect(m).toContain(`metarelay_relayer_treasury_balance_wei{chain="${env.chainId}"} ${Number(treasuryBefore)}`);
  }, 60_000);

  it('an empty treasury refills nothing: one FAILED record saying why, the sender untouched, no retry within a minute', async () => {
    const sender = senders[1];
    await setBalance(TREASURY, 0n);
    await setBalance(sender, parseEther('0.25'));
    await waitFor('the refused refill recorded', async () => (await refillRows(sender)).length > 0, 30_000, 100);
    await sweeps(3);
    const rows = await refillRows(sender);
    expect(rows).toHaveLength(1);
    expect(rows[0].status).toBe('FAILED');
    expect(rows[0].error).toMatch(/the treasury holds 0 wei/);
    expect(await balance(sender)).toBe(parseEther('0.25'));
    expect(await env.public.getTransactionCount({ address: TREASURY })).toBe(1); // only the first refill
    const status = await env.call('RuntimeStatus', {}, { 'x-access-key': env.accessKey });
    expect(status.body.status.senders[1]).toMatchObject({ belowFloor: true, enabled: false });
    expect(status.body.status.refills.recent[0]).toMatchObject({ sender: sender.toLowerCase(), status: 'FAILED', txnHash: null });
    const m = await env.services.metrics.registry.metrics();
    expect(m).toContain(`metarelay_relayer_sender_refills_total{chain="${env.chainId}",outcome="unfunded"} 1`);
    expect(m).toContain(`metarelay_relayer_treasury_balance_wei{chain="${env.chainId}"} 0`);
  }, 60_000);

  it('config: the target must be above the floor, and the treasury key is masked', () => {
    const base = { ...env.services.config.chains[0], relayer: { senderKeys: [TREASURY_KEY], minSenderBalance: '1', refill: { treasuryKey: TREASURY_KEY, targetBalance: '1' } } };
    expect(() => parseConfig({ database: 'memory://', chains: [base] })).toThrow(/refill.targetBalance must be above minSenderBalance/);
    const masked = JSON.stringify(maskedConfig(env.services.config));
    expect(masked).not.toContain(TREASURY_KEY.slice(2));
    expect(masked).toContain(`treasury ${TREASURY}`);
  });
});
