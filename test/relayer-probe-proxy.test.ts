// The probe-aware proxy (src/relayer/intake/probe-proxy.ts), checked on a real anvil with nothing
// deployed: a wallet, its implementation and the probe exist only as eth_call state overrides. It must
// answer every call exactly as the wallet proxy does, and hand its implementation slot to the probe's
// magic read only.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { decodeFunctionResult, encodeFunctionData, pad, parseAbi, type Address, type Hex } from 'viem';
import { startAnvil, type AnvilHandle } from '../src/devchain/index.ts';
import { RpcError, rpcCall } from '../src/devchain/rpc.ts';
import { probeAbi } from '../src/relayer/abi.ts';
import { RELAY_PROBE_CODE } from '../src/relayer/intake/probe-code.ts';
import { SLOT_MAGIC, SLOT_MAGIC_SPACE, probeAwareProxyCode } from '../src/relayer/intake/probe-proxy.ts';
import { WALLET_PROXY_CODE } from '../src/relayer/intake/wallets.ts';

let anvil: AnvilHandle;
beforeAll(async () => {
  anvil = await startAnvil({ blockTime: null });
});
afterAll(async () => {
  await anvil?.stop();
});

const WALLET: Address = '0x00000000000000000000000000000000000a11e7';
const IMPL: Address = '0x0000000000000000000000000000000000001a1a';
const PROBE: Address = '0x00000000000000000000000000000000000f0be1';
const OTHER_PROBE: Address = '0x00000000000000000000000000000000000f0be2';
const STRANGER: Address = '0x0000000000000000000000000000000000005747';

/**
 * An implementation that answers (address(this), caller, calldata), and reverts with the same when the
 * calldata starts with 0xee: what it returns shows it ran by delegatecall in the wallet's context.
 */
const IMPL_CODE: Hex = `0x${[
  '30',
  '6000',
  '52', // mstore(0, address())
  '33',
  '6020',
  '52', // mstore(32, caller())
  '36',
  '6000',
  '6040',
  '37', // calldatacopy(64, 0, calldatasize())
  '36',
  '6040',
  '01', // 64 + calldatasize()
  '6000',
  '35',
  '60f8',
  '1c',
  '60ee',
  '14', // calldataload(0) >> 248 == 0xee
  '6021',
  '57', // jumpi(0x21)
  '6000',
  'f3', // return(0, 64 + calldatasize())
  '5b',
  '6000',
  'fd', // 0x21: revert(0, 64 + calldatasize())
].join('')}`;

const readNonce = parseAbi(['function readNonce(uint256 space) view returns (uint256)']);
const nonceCall = (space: bigint) => encodeFunctionData({ abi: readNonce, functionName: 'readNonce', args: [space] });

function state(walletCode: Hex, probeAt?: Address) {
  return {
    [WALLET]: { code: walletCode, stateDiff: { [pad(WALLET)]: pad(IMPL) } },
    [IMPL]: { code: IMPL_CODE },
    ...(probeAt ? { [probeAt]: { code: RELAY_PROBE_CODE } } : {}),
  };
}

/** eth_call's answer: returned data, or the revert data. */
async function outcome(from: Address, to: Address, data: Hex, override: object): Promise<{ ok: boolean; data: Hex }> {
  try {
    return { ok: true, data: await rpcCall<Hex>(anvil.rpcUrl, 'eth_call', [{ from, to, data, gas: '0x1000000' }, 'latest', override]) };
  } catch (err) {
    if (!(err instanceof RpcError)) throw err;
    return { ok: false, data: (typeof err.data === 'string' ? err.data : ((err.data as { data?: Hex })?.data ?? '0x')) as Hex };
  }
}

/** RelayProbe.probeMany at `probeAt`: one job (a call into the wallet) and nonce reads of the wallet. */
async function probeMany(probeAt: Address, walletCode: Hex, spaces: bigint[], input: Hex) {
  const data = encodeFunctionData({
    abi: probeAbi,
    functionName: 'probeMany',
    args: [[{ entry: WALLET, data: input, gasCap: 1_000_000n, trialGas: 0n }], STRANGER, [], spaces.map(() => WALLET), spaces, 12_000n],
  });
  const r = await outcome(STRANGER, probeAt, data, state(walletCode, probeAt));
  expect(r.ok).toBe(true);
  const [, nonces, results] = decodeFunctionResult({ abi: probeAbi, functionName: 'probeMany', data: r.data });
  return { nonces, result: results[0] };
}

describe('the probe-aware proxy', () => {
  const aware = probeAwareProxyCode(PROBE);

  it('is the wallet proxy behind a 69-byte entry, its jump target moved to 0x5d, the slot read at 0x5f', () => {
    const proxy = `0x${aware.slice(2 + 69 * 2, 2 + 95 * 2)}`;
    expect(proxy).toBe(WALLET_PROXY_CODE.replace('601857', '605d57'));
    const byte = (i: number) => aware.slice(2 + i * 2, 4 + i * 2);
    expect([byte(0x5d), byte(0x5f), byte(67)]).toEqual(['5b', '5b', '5f']);
    expect(aware.slice(6, 46)).toBe(PROBE.slice(2));
    expect(aware.slice(2 + 32 * 2, 2 + 64 * 2)).toBe(SLOT_MAGIC.slice(2));
    // Above every nonce space a bundle can name (its nonce's top 160 bits).
    expect(SLOT_MAGIC_SPACE >= 1n << 160n).toBe(true);
  });

  it('answers every call as the wallet proxy does: same return data, same revert, the implementation run in the wallet', async () => {
    const inputs: Hex[] = [
      '0x',
      '0x12',
      nonceCall(5n),
      nonceCall(SLOT_MAGIC_SPACE),
      `${nonceCall(SLOT_MAGIC_SPACE)}00`,
      `0x${'ab'.repeat(300)}`,
      '0xee',
      `0xee${'01'.repeat(40)}`,
      `0xee${nonceCall(1n).slice(4)}`,
    ];
    for (const from of [STRANGER, WALLET, IMPL]) {
      for (const data of inputs) {
        const original = await outcome(from, WALLET, data, state(WALLET_PROXY_CODE));
        const probed = await outcome(from, WALLET, data, state(aware));
        expect(probed, `${from} ${data}`).toEqual(original);
        expect(original.ok, data).toBe(!data.startsWith('0xee'));
        // The implementation ran by delegatecall: address(this) is the wallet.
        expect(original.data.slice(0, 66)).toBe(pad(WALLET));
      }
    }
  });

  it('gives the slot to the magic read of the probe, through RelayProbe.peek as from the probe directly', async () => {
    const direct = await outcome(PROBE, WALLET, nonceCall(SLOT_MAGIC_SPACE), state(aware));
    expect(direct).toEqual({ ok: true, data: pad(IMPL) });
    const { nonces, result } = await probeMany(PROBE, aware, [SLOT_MAGIC_SPACE, 5n], '0x1234');
    // The magic read gets the slot; a real nonce read of the same wallet reaches the implementation.
    expect(nonces).toEqual([BigInt(IMPL), BigInt(WALLET)]);
    expect(result.ok).toBe(true);
    // The job's own call into the wallet (from the probe, not 36 bytes) ran the implementation.
    expect(result.ret.slice(0, 66)).toBe(pad(WALLET));
  });

  it('does not give the slot to anyone else: the same read falls through to the implementation', async () => {
    for (const from of [STRANGER, OTHER_PROBE, WALLET, IMPL]) {
      const r = await outcome(from, WALLET, nonceCall(SLOT_MAGIC_SPACE), state(aware));
      expect(r).toEqual(await outcome(from, WALLET, nonceCall(SLOT_MAGIC_SPACE), state(WALLET_PROXY_CODE)));
      expect(r.data).not.toBe(pad(IMPL));
    }
    // Another probe (another address) reading the wallet whose code names PROBE.
    const { nonces } = await probeMany(OTHER_PROBE, aware, [SLOT_MAGIC_SPACE], '0x1234');
    expect(nonces).toEqual([BigInt(WALLET)]);
    // And the magic read without the override reads no slot either.
    const { nonces: plain } = await probeMany(PROBE, WALLET_PROXY_CODE, [SLOT_MAGIC_SPACE], '0x1234');
    expect(plain).toEqual([BigInt(WALLET)]);
  });

  it('costs 47 gas more per call into the wallet, nothing else', async () => {
    const input = `0x${'ab'.repeat(100)}` as Hex;
    const original = await probeMany(PROBE, WALLET_PROXY_CODE, [], input);
    const probed = await probeMany(PROBE, aware, [], input);
    expect(probed.result.ret).toBe(original.result.ret);
    expect(probed.result.gasUsed - original.result.gasUsed).toBe(47n);
  });
});
