import { randomBytes } from 'node:crypto';
import { decodeErrorResult, decodeFunctionResult, encodeAbiParameters, encodeFunctionData, padHex, toHex, type Address, type Hex, type PublicClient, type StateOverride } from 'viem';
import { keccak256 } from '../../chain/evm-crypto.ts';
import { estimationAbi, probeAbi, walletErrorsAbi } from '../abi.ts';
import { sequenceCreationCode } from '../artifacts.ts';
import type { WalletTransaction } from './bundle.ts';
import { RELAY_PROBE_CODE } from './probe-code.ts';
import { blockOverridesFor, fundingFor, nextBlockOverrides, type RunAs } from './run-as.ts';
import { SLOT_MAGIC_SPACE, probeAwareProxyCode } from './probe-proxy.ts';

/**
 * Where the probe's code is placed by state override: a fresh random address per simulation, so no
 * contract can recognise the simulator by a well-known address (`extcodesize`). Defence in depth only:
 * fees are read from calldata and checked after inclusion, so a contract that does detect simulation
 * still cannot make the relayer pay for nothing.
 */
export function probeAddress(): Address {
  return `0x${randomBytes(20).toString('hex')}` as Address;
}

/** keccak256("org.arcadeum.module.calls.nonce"): ModuleNonce's storage key. */
export const NONCE_KEY = '0x8d0bf1fd623d628c741362c1289948e57b3e2905218c676d3e69abee36d6ae2e';

/** The storage slot of a v2 wallet's nonce for one space (ModuleStorage.readBytes32Map(NONCE_KEY, space)). */
export function nonceSlot(space: bigint): Hex {
  return keccak256(encodeAbiParameters([{ type: 'bytes32' }, { type: 'bytes32' }], [NONCE_KEY, padHex(toHex(space), { size: 32 })]));
}

/** ERC-7201 location of DelegatedWallet's nonces (contracts/DelegatedWallet.sol): mapping(uint256 space => uint256). */
export const DELEGATED_NONCES_LOCATION = '0x3d41b98ac73051b8c6ff26b036b63934b115ab8e3f428764da3e4a967e551900';

/** The storage slot of a delegated EOA's nonce for one space (DelegatedWallet, EIP-7702). */
export function delegatedNonceSlot(space: bigint): Hex {
  return keccak256(encodeAbiParameters([{ type: 'uint256' }, { type: 'bytes32' }], [space, DELEGATED_NONCES_LOCATION]));
}

export interface NonceOverride {
  wallet: Address;
  space: bigint;
  nonce: bigint;
}

export interface ExactSimulation {
  ok: boolean;
  reason?: string;
  /** Gas the entrypoint call burned on the generous path (without the transaction's intrinsic cost). */
  gasUsed: bigint;
  /** What the payment address received, per token (address(0) = native), in the order asked. */
  paid: bigint[];
  /** eth_estimateGas of the real transaction from the sender; undefined when the node refused it. */
  estimate?: bigint;
}

/** The base cost of a transaction carrying `data` (EIP-2028 rates, EIP-7623 floor). */
export function intrinsicGas(data: Hex): bigint {
  // Counted in numbers, not bigints: it runs over every byte of every bundle taken in (48 = '0').
  let zero = 0;
  for (let i = 2; i < data.length; i += 2) if (data.charCodeAt(i) === 48 && data.charCodeAt(i + 1) === 48) zero++;
  const nonZero = Math.ceil((data.length - 2) / 2) - zero;
  const standard = 21_000 + zero * 4 + nonZero * 16;
  const floor = 21_000 + (zero + nonZero * 4) * 10;
  return BigInt(standard > floor ? standard : floor);
}

/** A revert payload in words: a wallet error by name, Error(string), Panic, or the raw bytes. */
export function describeRevert(data: Hex | undefined): string {
  if (!data || data === '0x') return 'reverted without a reason';
  try {
    const d = decodeErrorResult({ abi: walletErrorsAbi, data }) as { errorName: string; args?: readonly unknown[] };
    if (d.errorName === 'Error') return String(d.args?.[0]);
    if (d.errorName === 'Panic') return `panic ${String(d.args?.[0])}`;
    const args = (d.args ?? []).map((a) => (typeof a === 'bigint' ? a.toString() : String(a)));
    if (d.errorName === 'CallReverted' && d.args) return `transaction ${String(d.args[0])} reverted: ${describeRevert(d.args[1] as Hex)}`;
    return `${d.errorName}(${args.map((a) => (a.length > 80 ? `${a.slice(0, 77)}...` : a)).join(', ')})`;
  } catch {
    return `reverted with ${data.length > 202 ? `${data.slice(0, 202)}...` : data}`;
  }
}

/** Code placed on an account for a simulation: an EOA's EIP-7702 delegation, applied before the transaction that carries it is sent. */
export interface CodeOverride {
  address: Address;
  code: Hex;
}

/**
 * The probe's code, predecessors' nonces and placed code, one entry per account. A nonce is written to
 * both layouts (the v2 wallet's slot and DelegatedWallet's ERC-7201 slot): each wallet reads only its
 * own, the other is an unused hashed slot, so no wallet-kind lookup is needed here.
 */
function overrides(probe: Address, nonces: NonceOverride[], codes: CodeOverride[] = [], slotReads: Address[] = []) {
  const byWallet = new Map<Address, { code?: Hex; stateDiff: { slot: Hex; value: Hex }[] }>();
  const entry = (a: Address) => {
    const k = a.toLowerCase() as Address;
    let e = byWallet.get(k);
    if (!e) byWallet.set(k, (e = { stateDiff: [] }));
    return e;
  };
  for (const n of nonces) {
    const value = padHex(toHex(n.nonce), { size: 32 });
    entry(n.wallet).stateDiff.push({ slot: nonceSlot(n.space), value }, { slot: delegatedNonceSlot(n.space), value });
  }
  if (slotReads.length) {
    const code = probeAwareProxyCode(probe);
    for (const a of slotReads) entry(a).code = code;
  }
  const read = new Set(slotReads.map((a) => a.toLowerCase()));
  for (const c of codes) {
    // Other code there would answer the slot read with something else, taken for the slot.
    if (read.has(c.address.toLowerCase())) throw new Error(`probe: ${c.address} has placed code and a slot read in one call`);
    entry(c.address).code = c.code;
  }
  return [
    { address: probe, code: RELAY_PROBE_CODE as Hex },
    ...[...byWallet].map(([address, e]) => ({ address, ...(e.code ? { code: e.code } : {}), ...(e.stateDiff.length ? { stateDiff: e.stateDiff } : {}) })),
  ];
}

/**
 * Runs the exact call a sender would send, through the probe (does it execute, how much gas, what fee
 * arrives), and estimates the real transaction; both go out in one JSON-RPC batch. `nonces` lets a
 * bundle whose predecessors are still queued be simulated as if they had run.
 */
export async function simulateExact(
  client: PublicClient,
  args: { sender: Address; entrypoint: Address; input: Hex; payee: Address; tokens: Address[]; nonces: NonceOverride[]; gasCap: bigint },
): Promise<ExactSimulation> {
  const probe = probeAddress();
  const stateOverride = overrides(probe, args.nonces);
  const probeData = encodeFunctionData({ abi: probeAbi, functionName: 'probe', args: [args.entrypoint, args.input, args.payee, args.tokens] });
  const [probed, estimate] = await Promise.allSettled([
    client.call({ account: args.sender, to: probe, data: probeData, gas: args.gasCap, stateOverride }),
    client.estimateGas({ account: args.sender, to: args.entrypoint, data: args.input, gas: args.gasCap, stateOverride: stateOverride.slice(1) }),
  ]);
  if (probed.status === 'rejected') throw probed.reason;
  const [ok, ret, gasUsed, paid] = decodeFunctionResult({ abi: probeAbi, functionName: 'probe', data: probed.value.data ?? '0x' });
  return {
    ok,
    reason: ok ? undefined : describeRevert(ret),
    gasUsed,
    paid: [...paid],
    estimate: estimate.status === 'fulfilled' ? estimate.value : undefined,
  };
}

/** One bundle for probeMany. */
export interface ProbeJob {
  sender: Address;
  entrypoint: Address;
  input: Hex;
  /** Wallet nonce slots set by state override (predecessors still queued, simulated as if they had run). */
  nonces: NonceOverride[];
  gasCap: bigint;
  /** Gas to try the bundle again with (its transaction's gas limit minus intrinsic gas); default gasUsed × margin. */
  trialGas?: bigint;
  /** Code placed by state override (an EIP-7702 delegation the transaction will carry); such a job runs in an eth_call of its own. */
  codes?: CodeOverride[];
  /**
   * The wallets whose bundles the job runs (default: its entrypoint): a job shares an eth_call with
   * another's nonce overrides only when it touches none of the wallets they cover, or sets the same.
   */
  wallets?: Address[];
  /** Wallet nonces to read at the same state (never of a wallet whose slot a job of the call overrides). */
  reads?: { wallet: Address; space: bigint }[];
  /**
   * Wallet proxies (code known) whose implementation slot to read at the same state: each gets the
   * probe-aware proxy (probe-proxy.ts), transparent to every call but the probe's read, so unlike
   * `codes` such a job may share its eth_call.
   */
  slotReads?: Address[];
  /**
   * Run on this block (one already seen) instead of at latest: a node behind it refuses ("header not
   * found") rather than answering from state older than what the relayer knows. Jobs share an eth_call
   * only with jobs of the same block.
   */
  block?: bigint;
}

export interface ProbeResult extends ExactSimulation {
  /** The block the call ran on top of. */
  block: bigint;
  /** Whether the bundle also executed with its trial gas; 'failed' and 'untried' come with an eth_estimateGas `estimate`. */
  trial: 'passed' | 'failed' | 'untried';
  /**
   * Whether the gas limit rests on the node's eth_estimateGas (an executed bundle the trial did not
   * prove, or every one where ProbeSettings.alwaysEstimate): then an `estimate` missing means the node
   * refused it, and no limit can be sized (intake refuses Unavailable).
   */
  estimateNeeded: boolean;
  /** The job's `reads`, in order. */
  chainNonces: bigint[];
  /** The implementation slots of the job's `slotReads`, in order. */
  slots: Hex[];
}

export interface ProbeSettings {
  payee: Address;
  tokens: Address[];
  /** The gas margin in basis points: a bundle is tried again with gasUsed × trialBps / 10 000. */
  trialBps: bigint;
  /**
   * How simulations run like the transaction that will be mined (run-as.ts): its fee fields, the real
   * sender's balance, the next block's base fee. Without it, unpriced (gas price 0: a tell of its own).
   */
  runAs?: () => Promise<RunAs>;
  /**
   * Ask eth_estimateGas even for a bundle the trial proved: on Arbitrum the limit must also hold the L1
   * component, which only the node's estimate counts (fee-model.ts).
   */
  alwaysEstimate?: boolean;
}

/**
 * The gas one probeMany eth_call is given: each job's cap twice (its run and its trial) and room for the
 * probe's own frames, at most geth's default RPC gas cap (a node caps a larger figure silently). Given
 * explicitly, since the sender must be able to buy it at the fee cap (run-as.ts fundingFor).
 */
const PROBE_CALL_GAS_MAX = 50_000_000n;
const PROBE_FRAME_GAS = 1_000_000n;
function probeCallGas(jobs: readonly ProbeJob[]): bigint {
  const want = jobs.reduce((a, j) => a + 2n * j.gasCap, PROBE_FRAME_GAS);
  return want < PROBE_CALL_GAS_MAX ? want : PROBE_CALL_GAS_MAX;
}

/** The fee fields, block overrides and the sender's funding of one run (nothing without runAs: unpriced, as before). */
async function asReal(runAs: RunAs | undefined, sender: Address, gas: bigint, pinned?: bigint) {
  if (!runAs) return { fee: {}, funding: [] as StateOverride, blockOverrides: undefined };
  return { fee: runAs.fees, funding: await fundingFor(runAs, sender, gas), blockOverrides: blockOverridesFor(runAs, pinned) };
}

/**
 * Many independent bundles from one sender in ONE eth_call: each runs in its own reverting frame
 * (RelayProbe.probeMany), with its own gas measurement, payment reading and a second run with the gas
 * its transaction will have, so eth_estimateGas is needed only for a bundle that fails that trial.
 * All jobs must share the sender and have compatible overrides (see ProbeBatcher).
 */
export async function probeMany(client: PublicClient, settings: ProbeSettings, jobs: ProbeJob[]): Promise<ProbeResult[]> {
  if (jobs.length === 0) return [];
  const probe = probeAddress();
  const gas = probeCallGas(jobs);
  const runAs = await settings.runAs?.();
  const { fee, funding, blockOverrides } = await asReal(runAs, jobs[0].sender, gas, jobs[0].block);
  // A slot read is a nonce read of space SLOT_MAGIC, answered by the probe-aware proxy with the slot.
  const reads = jobs.flatMap((j) => [...(j.reads ?? []), ...(j.slotReads ?? []).map((wallet) => ({ wallet, space: SLOT_MAGIC_SPACE }))]);
  const data = encodeFunctionData({
    abi: probeAbi,
    functionName: 'probeMany',
    args: [
      jobs.map((j) => ({ entry: j.entrypoint, data: j.input, gasCap: j.gasCap, trialGas: j.trialGas ?? 0n })),
      settings.payee,
      settings.tokens,
      reads.map((r) => r.wallet),
      reads.map((r) => r.space),
      settings.trialBps,
    ],
  });
  const r = await client.call({
    account: jobs[0].sender,
    ...(jobs[0].block === undefined ? {} : { blockNumber: jobs[0].block }),
    to: probe,
    data,
    gas,
    ...(blockOverrides ? { blockOverrides } : {}),
    stateOverride: [
      ...overrides(
        probe,
        jobs.flatMap((j) => j.nonces),
        jobs.flatMap((j) => j.codes ?? []),
        jobs.flatMap((j) => j.slotReads ?? []),
      ),
      ...funding,
    ],
    ...fee,
  });
  const [reported, nonces, results] = decodeFunctionResult({ abi: probeAbi, functionName: 'probeMany', data: r.data ?? '0x' });
  // A pinned run was given the next block's number (blockOverridesFor): the block it ran on top of is the one before.
  const block = blockOverrides?.number !== undefined ? reported - 1n : reported;
  let k = 0;
  const out = await Promise.all(
    jobs.map(async (job, i): Promise<ProbeResult> => {
      const chainNonces = nonces.slice(k, (k += job.reads?.length ?? 0));
      const slots = nonces.slice(k, (k += job.slotReads?.length ?? 0)).map((v) => padHex(toHex(v), { size: 32 }));
      const x = results[i];
      if (!x.ran) {
        // Not judged within this call's gas (a heavy neighbour): alone, it has the whole call.
        if (jobs.length === 1)
          return { ok: false, reason: 'the bundle needs more gas than the node gives one eth_call', gasUsed: 0n, paid: [], block, trial: 'untried', estimateNeeded: false, chainNonces, slots };
        const [alone] = await probeMany(client, settings, [job]);
        return { ...alone, chainNonces: alone.chainNonces.length ? alone.chainNonces : chainNonces, slots: alone.slots.length ? alone.slots : slots };
      }
      const trial = x.trial === 1 ? 'passed' : x.trial === 2 ? 'failed' : 'untried';
      const estimateNeeded = x.ok && (trial !== 'passed' || settings.alwaysEstimate === true);
      const res: ProbeResult = { ok: x.ok, reason: x.ok ? undefined : describeRevert(x.ret), gasUsed: x.gasUsed, paid: [...x.paid], block, trial, estimateNeeded, chainNonces, slots };
      // Only a bundle the trial did not prove costs an eth_estimateGas (deep gas forwarding, a gasLimit
      // of its own): the node's binary search then decides, as before. Asked at the block the run was
      // made on: it is a request of its own, which a load balancer may hand to a node a block behind
      // (where a wallet deployed since has no code and "needs" next to no gas); such a node refuses it.
      if (estimateNeeded) {
        // viem's estimateGas takes no block overrides: the estimate sees the latest block's base fee and number.
        const { fee, funding } = await asReal(runAs, job.sender, job.gasCap);
        res.estimate = await client
          .estimateGas({
            account: job.sender,
            to: job.entrypoint,
            data: job.input,
            gas: job.gasCap,
            blockNumber: block,
            stateOverride: [...overrides(probe, job.nonces, job.codes).slice(1), ...funding],
            ...fee,
          })
          .catch(() => undefined);
      }
      return res;
    }),
  );
  return out;
}

export interface TxSimulation {
  executed: boolean;
  succeeded: boolean;
  result: Hex;
  reason?: string;
  gasUsed: bigint;
}

const moduleCode = new Map<number, Promise<Hex>>();

/** The gas-estimation module's runtime code, produced by the node itself from the creation code. */
function estimationModuleCode(client: PublicClient, chainId: number): Promise<Hex> {
  let p = moduleCode.get(chainId);
  if (!p) {
    p = client.call({ data: sequenceCreationCode('MainModuleGasEstimation') }).then((r) => {
      if (!r.data || r.data === '0x') throw new Error('the node returned no runtime code for MainModuleGasEstimation');
      return r.data;
    });
    p.catch(() => moduleCode.delete(chainId));
    moduleCode.set(chainId, p);
  }
  return p;
}

/** Bytes of code simulateUnsigned places on each wallet it runs (what a FeeOptions bundle costs in state overrides). */
export async function estimationCodeBytes(client: PublicClient, chainId: number): Promise<number> {
  return (await estimationModuleCode(client, chainId)).length / 2 - 1;
}

/**
 * Runs a wallet's transactions without its signature or nonce: the wallet's code is swapped for
 * Sequence's gas-estimation module (by state override), which executes each one and reports its gas.
 * This is what FeeOptions and Simulate use, since they receive unsigned bundles.
 */
export async function simulateUnsigned(client: PublicClient, chainId: number, wallet: Address, txs: readonly WalletTransaction[], gasCap: bigint, runAs?: RunAs): Promise<TxSimulation[]> {
  const code = await estimationModuleCode(client, chainId);
  const data = encodeFunctionData({ abi: estimationAbi, functionName: 'simulateExecute', args: [txs] });
  // Run like the transaction (run-as.ts): from a real sender with its real balance, at the fees it will be
  // signed with, in the next block. The wallet is called by the sender, as a send of its execute is.
  const sender = runAs?.sender;
  // `gasCap` is for the transactions: the simulation's own calldata cost (the transactions once more, as
  // the argument of simulateExecute) comes on top, or a bundle with large calldata could never run.
  const gas = gasCap + intrinsicGas(data);
  const { fee, funding } = await asReal(runAs, sender ?? wallet, gas);
  const blockOverrides = runAs ? nextBlockOverrides(runAs) : undefined;
  const r = await client.call({
    account: sender,
    to: wallet,
    data,
    gas,
    stateOverride: [{ address: wallet, code }, ...funding],
    ...(blockOverrides ? { blockOverrides } : {}),
    ...fee,
  });
  const results = decodeFunctionResult({ abi: estimationAbi, functionName: 'simulateExecute', data: r.data ?? '0x' });
  return results.map((x) => ({
    executed: x.executed,
    succeeded: x.succeeded,
    result: x.result,
    reason: x.executed && !x.succeeded ? describeRevert(x.result) : undefined,
    gasUsed: x.gasUsed,
  }));
}
