// A chain without EIP-1559 (anvil on the berlin hardfork): the engine prices, signs and replaces with a
// legacy gas price, and the node takes what it signs.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createPublicClient, createWalletClient, http, type PublicClient } from 'viem';
import { privateKeyToAccount } from 'viem/accounts';
import { startAnvil, type AnvilHandle } from '../src/devchain/index.ts';
import { broadcast, sign } from '../src/relayer/engine/attempts.ts';
import { marketFees, raise, replacementFees, type FeePolicy } from '../src/relayer/engine/gas-price.ts';
import { simulateExact } from '../src/relayer/intake/simulate.ts';
import { SENDER_KEYS } from './support/relayer-env.ts';
import { mine, setAutomine } from './support/anvil-control.ts';

let anvil: AnvilHandle;
let client: PublicClient;
const policy: FeePolicy = { capWei: 10n ** 12n, minPriorityWei: 1n, bumpPercent: 10 };

beforeAll(async () => {
  anvil = await startAnvil({ blockTime: null, args: ['--hardfork', 'berlin'] });
  client = createPublicClient({ transport: http(anvil.rpcUrl), cacheTime: 0 }) as PublicClient;
}, 60_000);

afterAll(async () => {
  await anvil?.stop();
});

describe('legacy gas pricing (no base fee)', () => {
  it('prices a first attempt with eth_gasPrice, and a replacement at the same nonce is taken by the node at >= 110%', async () => {
    const fees = await marketFees(client, policy);
    expect(fees.type).toBe('legacy');
    if (fees.type !== 'legacy') return;
    expect(fees.gasPrice).toBeGreaterThan(0n);

    const account = privateKeyToAccount(SENDER_KEYS[0]);
    const nonce = await client.getTransactionCount({ address: account.address, blockTag: 'pending' });
    await setAutomine(anvil.rpcUrl, false);
    const first = await sign(account, anvil.chainId, { nonce, to: account.address, data: '0x', value: 0n, gas: 21_000n, fees });
    expect(await broadcast(client, first.raw)).toEqual({ ok: true });

    const rep = replacementFees(fees, fees, policy);
    expect(rep.ok).toBe(true);
    if (!rep.ok || rep.fees.type !== 'legacy') throw new Error('no legacy replacement');
    expect(rep.fees.gasPrice).toBe(raise(fees.gasPrice, 10));
    const second = await sign(account, anvil.chainId, { nonce, to: account.address, data: '0x', value: 0n, gas: 21_000n, fees: rep.fees });
    expect(await broadcast(client, second.raw)).toEqual({ ok: true });

    await mine(anvil.rpcUrl, 1);
    const receipt = await client.getTransactionReceipt({ hash: second.hash });
    expect(receipt.status).toBe('success');
    expect(receipt.type).toBe('legacy');
    await expect(client.getTransactionReceipt({ hash: first.hash })).rejects.toThrow();
  }, 60_000);
});

describe('the simulation probe on a chain older than shanghai', () => {
  it('runs (no PUSH0 or MCOPY): a call that executes is ok, one that reverts is not', async () => {
    await setAutomine(anvil.rpcUrl, true);
    const account = privateKeyToAccount(SENDER_KEYS[1]);
    const wallet = createWalletClient({ account, transport: http(anvil.rpcUrl) });
    // Creation code returning the runtime PUSH1 0 PUSH1 0 REVERT: a contract every call to which reverts.
    const hash = await wallet.deployContract({ abi: [], bytecode: '0x6005600c60003960056000f360006000fd', chain: null, gasPrice: await client.getGasPrice() });
    const reverter = (await client.waitForTransactionReceipt({ hash, pollingInterval: 50 })).contractAddress!;
    const args = { sender: account.address, input: '0x' as const, payee: account.address, tokens: [], nonces: [], gasCap: 1_000_000n };

    const ok = await simulateExact(client, { ...args, entrypoint: '0x00000000000000000000000000000000000000e1' });
    expect(ok.ok).toBe(true);
    const reverted = await simulateExact(client, { ...args, entrypoint: reverter });
    expect(reverted.ok).toBe(false);
    expect(reverted.gasUsed).toBeGreaterThan(0n);
  });
});
