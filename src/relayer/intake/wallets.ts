import { decodeFunctionResult, encodeFunctionData, getAddress, keccak256, padHex, toHex, zeroAddress, type Address, type Hex, type PublicClient } from 'viem';
import { probeAbi } from '../abi.ts';
import { WindowBatch } from '../../util/window-batch.ts';
import { RELAY_PROBE_CODE } from './probe-code.ts';
import { probeAddress } from './simulate.ts';
import type { SequenceContext } from '../context.ts';
import { askAgainWhileBehind } from './ask-again.ts';
import { designatorHash } from './authorization.ts';

/**
 * The runtime code every Sequence v2 wallet has: a proxy that delegates to the address stored at the
 * storage slot equal to its own address (WALLET_CREATION_CODE returns these 26 bytes).
 */
export const WALLET_PROXY_CODE: Hex = '0x363d3d373d3d3d363d30545af43d82803e903d91601857fd5bf3';

/** What an address is, as far as relaying goes. */
export type WalletKind =
  /**
   * The v2 wallet proxy pointing at a known main module, or an EOA delegated (EIP-7702 designator
   * 0xef0100 ‖ impl) to a wallet implementation the relayer accepts: its execute checks signatures and nonces.
   */
  | 'wallet'
  /** No code yet: a counterfactual wallet, usable only when the same call deploys it. */
  | 'empty'
  /** Code that is not a Sequence wallet of this relayer's context (or a wallet switched to unknown code). */
  | 'other';

/** Proxies remembered at most; past that the memory starts over (a cache, not a record). */
const MAX_REMEMBERED = 100_000;

const PROXY_CODE_HASH = keccak256(WALLET_PROXY_CODE);
/**
 * ADDRESS SLOAD PUSH1 0 MSTORE PUSH1 32 PUSH1 0 RETURN: put on a wallet by state override, it answers
 * any call with the wallet's storage at slot address(this), where the proxy keeps its implementation.
 */
const SLOT_READER_CODE: Hex = '0x305460005260206000f3';

/** Code hashes of many accounts in one eth_call (the probe's codeHashes; zero: no code). */
async function readCodeHashes(client: PublicClient, accounts: Address[], blockNumber?: bigint): Promise<Hex[]> {
  const probe = probeAddress();
  const r = await client.call({
    ...(blockNumber === undefined ? {} : { blockNumber }),
    to: probe,
    data: encodeFunctionData({ abi: probeAbi, functionName: 'codeHashes', args: [accounts] }),
    stateOverride: [{ address: probe, code: RELAY_PROBE_CODE as Hex }],
  });
  return [...decodeFunctionResult({ abi: probeAbi, functionName: 'codeHashes', data: r.data ?? '0x' })];
}

/** Implementation slots of many wallets in one eth_call: each answers through SLOT_READER, read by the probe's peek. */
async function readSlots(client: PublicClient, wallets: Address[], blockNumber?: bigint): Promise<Hex[]> {
  const probe = probeAddress();
  const data = encodeFunctionData({ abi: probeAbi, functionName: 'probeMany', args: [[], zeroAddress, [], wallets, wallets.map(() => 0n), 0n] });
  const r = await client.call({
    ...(blockNumber === undefined ? {} : { blockNumber }),
    to: probe,
    data,
    stateOverride: [{ address: probe, code: RELAY_PROBE_CODE as Hex }, ...wallets.map((address) => ({ address, code: SLOT_READER_CODE }))],
  });
  const [, slots] = decodeFunctionResult({ abi: probeAbi, functionName: 'probeMany', data: r.data ?? '0x' });
  return slots.map((v) => padHex(toHex(v), { size: 32 }));
}

type CodeKind = 'proxy' | 'delegated' | 'empty' | 'other';

/**
 * What recognising wallets asks the node, batched and remembered. Reads asked within 2 ms go out as one
 * eth_call (code hashes) and one more (implementation slots), however many wallets. A wallet proxy's
 * code never changes (it has no way to replace itself), so it is remembered for good once seen; its
 * implementation slot can (a wallet may switch modules), so it is remembered only for the block it was
 * read in: `observe` a newer block and the slots are read again.
 */
export class WalletCache {
  private readonly proxies = new Set<Address>();
  private readonly codes: WindowBatch<Address, Hex>;
  private readonly slotReads: WindowBatch<Address, Hex>;
  private slots = new Map<Address, Promise<Hex>>();
  private block = -1n;

  /** Code hashes of the delegation designators of accepted implementations (a delegated EOA is never remembered: it may re-delegate). */
  private readonly delegated: Set<bigint>;

  /** `blockNumber`: every read at that block (a cache of one request, pinned to a block already seen), else at latest. */
  constructor(
    private readonly client: PublicClient,
    private readonly delegates: readonly Address[] = [],
    blockNumber?: bigint,
  ) {
    this.delegated = new Set(delegates.map((d) => BigInt(designatorHash(d))));
    this.codes = new WindowBatch((a) => readCodeHashes(client, a, blockNumber));
    this.slotReads = new WindowBatch((a) => readSlots(client, a, blockNumber));
  }

  /** A fresh cache of the same node and accepted implementations whose every read is at `block` (one request's, never shared). */
  at(block: bigint): WalletCache {
    return new WalletCache(this.client, this.delegates, block);
  }

  observe(block: bigint | number) {
    const b = BigInt(block);
    if (b <= this.block) return;
    this.block = b;
    this.slots = new Map();
  }

  async code(a: Address): Promise<CodeKind> {
    if (this.proxies.has(a)) return 'proxy';
    const h = BigInt(await this.codes.get(a));
    if (h === 0n) return 'empty';
    if (this.delegated.has(h)) return 'delegated';
    if (h !== BigInt(PROXY_CODE_HASH)) return 'other';
    if (this.proxies.size >= MAX_REMEMBERED) this.proxies.clear();
    this.proxies.add(a);
    return 'proxy';
  }

  slot(a: Address): Promise<Hex> {
    const slots = this.slots;
    let p = slots.get(a);
    if (!p) {
      p = this.slotReads.get(a);
      p.catch(() => slots.get(a) === p && slots.delete(a));
      slots.set(a, p);
    }
    return p;
  }

  /** Not a wallet proxy (yet): its slot means nothing and must not outlive this request (it may be deployed next block). */
  forget(a: Address) {
    this.slots.delete(a);
  }

  /** The newest block observed: slots remembered are of it. */
  get observed(): bigint {
    return this.block;
  }

  /** Whether `a` is a known wallet proxy whose slot this block has neither read nor is reading: recognise may leave it to the probe. */
  slotUnknown(a: Address): boolean {
    return this.proxies.has(a) && !this.slots.has(a);
  }

  /** A slot a simulation read at `block` (folded into its probe): remembered when that is still the block observed. */
  learn(a: Address, slot: Hex, block: bigint) {
    this.observe(block);
    // Zero beside proxy code is a state before the deployment (see Recognised.behind): never remembered.
    if (block === this.block && BigInt(slot) !== 0n && !this.slots.has(a)) this.slots.set(a, Promise.resolve(slot));
  }
}

/** Whether an implementation slot names the context's main module (or its upgradable form). */
export function slotKind(context: SequenceContext, slot: Hex): WalletKind {
  const modules = new Set([context.mainModule, context.mainModuleUpgradable].map((a) => a.toLowerCase()));
  return modules.has(`0x${slot.slice(-40)}`.toLowerCase()) ? 'wallet' : 'other';
}

export interface Recognised {
  kinds: Map<Address, WalletKind>;
  /** Taken for 'wallet' on their proxy code alone: the caller reads and checks their slot (slotKind) before relying on it. */
  unverified: Address[];
  /**
   * Wallet proxies whose implementation slot read zero. A proxy stores its implementation as it is
   * deployed, so that slot was read from a state before the deployment: a node behind (load-balanced
   * providers answer from nodes a block apart; the code, remembered for good, may have come from one
   * that is not). 'other' in `kinds` and not remembered: not to be judged on, but recognised again at
   * a block already seen (ChainRelayer.recognise, WalletReads.kindsAt), as 'empty' is.
   */
  behind: Address[];
}

/**
 * Recognises Sequence wallets by their code, never by the selectors their calldata uses: the proxy's
 * code, and its implementation slot naming the context's main module (or its upgradable form). Without
 * a cache, a fresh one: still one call for the codes and one for the slots of all the addresses. An EOA
 * whose code is the EIP-7702 designator of an implementation the cache accepts is a wallet too, known
 * from the same code-hash call. `defer`: when it is a known wallet proxy whose slot this block has not
 * read, it is 'wallet' provisionally and listed in `unverified`, with no slot read awaited. Intake reads
 * that slot in its simulation's own eth_call instead (ProbeJob.slotReads) and checks it there.
 */
export async function recogniseDeferring(client: PublicClient, context: SequenceContext, addresses: readonly Address[], cache?: WalletCache, defer?: Address): Promise<Recognised> {
  const c = cache ?? new WalletCache(client);
  const unique = [...new Set(addresses.map((a) => a.toLowerCase() as Address))];
  const later = defer?.toLowerCase() as Address | undefined;
  const unverified: Address[] = [];
  const behind: Address[] = [];
  const kinds = await Promise.all(
    unique.map(async (address): Promise<WalletKind> => {
      if (address === later && c.slotUnknown(address)) {
        unverified.push(address);
        return 'wallet';
      }
      const [code, slot] = await Promise.all([c.code(address), c.slot(address)]);
      if (code !== 'proxy') {
        c.forget(address);
        return code === 'delegated' ? 'wallet' : code === 'empty' ? 'empty' : 'other';
      }
      if (BigInt(slot) === 0n) {
        c.forget(address);
        behind.push(address);
        return 'other';
      }
      return slotKind(context, slot);
    }),
  );
  return { kinds: new Map(unique.map((a, i) => [a, kinds[i]])), unverified, behind };
}

/** recogniseDeferring with `pinned` (a cache of WalletCache.at a block seen), asked again while refused (ask-again.ts); null when no node answered for that block. */
export async function recognisePinned(client: PublicClient, context: SequenceContext, addresses: readonly Address[], pinned: WalletCache): Promise<Recognised | null> {
  return (await askAgainWhileBehind(() => recogniseDeferring(client, context, addresses, pinned))) ?? null;
}

export function describeKind(address: Address, kind: WalletKind): string {
  const a = getAddress(address);
  if (kind === 'empty') return `${a} is not deployed (it has no code): an undeployed wallet must be deployed by the same call, through the guest module`;
  return `${a} is not a Sequence v2 wallet of this relayer (its code is not the wallet proxy of a known main module, nor the EIP-7702 delegation to an accepted wallet implementation)`;
}
