// The WebAssembly keccak and signatures (chain/evm-crypto.ts) give what viem's JS gives, byte for byte:
// the relayer's transactions, their hashes and the intake's bundle ids must not depend on which ran.
import { describe, expect, it } from 'vitest';
import { keccak256 as viemKeccak, parseTransaction, recoverTransactionAddress, type Hex } from 'viem';
import { generatePrivateKey, privateKeyToAccount } from 'viem/accounts';
import { keccak256, signHash } from '../src/chain/evm-crypto.ts';
import { sign } from '../src/relayer/engine/attempts.ts';
import { senderAccounts, signingKeyOf } from '../src/relayer/engine/sender-pool.ts';
import { randomBytes } from 'node:crypto';

const hex = (n: number): Hex => `0x${randomBytes(n).toString('hex')}`;

describe('keccak and signatures in WebAssembly', () => {
  it('keccak-256 equals viem for empty, short, odd-sized and large inputs', () => {
    for (const n of [0, 1, 31, 32, 33, 135, 136, 137, 1500, 40_000]) {
      const data = hex(n);
      expect(keccak256(data)).toBe(viemKeccak(data));
    }
  });

  it('a signature equals viem account.sign for random keys and hashes (RFC 6979, low s)', async () => {
    for (let i = 0; i < 50; i++) {
      const key = generatePrivateKey();
      const hash = hex(32);
      const mine = signHash(hash, key);
      const theirs = await privateKeyToAccount(key).sign({ hash });
      expect(`${mine.r}${mine.s.slice(2)}${(27 + mine.yParity).toString(16)}`).toBe(theirs);
    }
  });

  it("the relayer's signed transactions equal viem's, of every type, and recover to the sender", async () => {
    const [account, hd] = senderAccounts({ senderKeys: [generatePrivateKey()], senderMnemonic: 'test test test test test test test test test test test junk', senderCount: 1 });
    for (const a of [account, hd]) {
      expect(signingKeyOf(a)).toMatch(/^0x[0-9a-f]{64}$/);
      const unsigned = { nonce: 7, to: privateKeyToAccount(generatePrivateKey()).address, data: hex(700), value: 3n, gas: 210_000n };
      const eip1559 = { ...unsigned, fees: { type: 'eip1559' as const, maxFeePerGas: 30_000_000_000n, maxPriorityFeePerGas: 1_000_000n } };
      const legacy = { ...unsigned, fees: { type: 'legacy' as const, gasPrice: 20_000_000_000n } };
      for (const u of [eip1559, legacy]) {
        const got = await sign(a, 31337, u);
        const tx = parseTransaction(got.raw);
        const { r, s, v, yParity, ...body } = tx;
        expect(await a.signTransaction({ ...body, chainId: 31337 } as never)).toBe(got.raw);
        expect(got.hash).toBe(viemKeccak(got.raw));
        expect(await recoverTransactionAddress({ serializedTransaction: got.raw as never })).toBe(a.address);
        expect([r, s, v, yParity].every((x) => x !== undefined)).toBe(true);
      }
    }
  });
});
