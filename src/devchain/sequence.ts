// Sequence v2 wallet contracts on a dev anvil, at their production addresses.
//
// The production contracts were deployed through the ERC-2470 singleton factory with CREATE2 and
// salt 0, so re-running those deployments with the exact published bytecode reproduces the same
// addresses. That lets the official clients (`v2.DeployedWalletContext` of @0xsequence/core) work
// against a local chain unchanged.

import { concat, encodeAbiParameters, getAddress, getContractAddress, pad, toHex, type Address, type Hash, type Hex } from 'viem';
import { RpcError } from './rpc.ts';
import { SEQUENCE_V2_CONTEXT, WALLET_CREATION_CODE } from '../relayer/context.ts';
import { sequenceCreationCode } from '../relayer/artifacts.ts';

/** ERC-2470 singleton factory, through which the production v2 contracts were deployed. */
export const SINGLETON_FACTORY: Address = '0xce0042B868300000d44A59004Da54A005ffdcf9f';

/**
 * anvil's built-in CREATE2 deployer (Arachnid's deterministic-deployment-proxy). It takes the same
 * calldata as the singleton factory (salt ‖ initcode), so its runtime code can stand in for it.
 */
export const ANVIL_CREATE2_DEPLOYER: Address = '0x4e59b44847b379578588920ca78fbf26c0b4956c';

// The relayer owns these facts; the dev kit deploys what the relayer expects.
export { SEQUENCE_V2_CONTEXT, WALLET_CREATION_CODE } from '../relayer/context.ts';
export { NONCE_KEY as SEQUENCE_NONCE_KEY, nonceSlot as sequenceNonceSlot } from '../relayer/intake/simulate.ts';

export type SequenceV2Context = typeof SEQUENCE_V2_CONTEXT;

export type SequenceContractName = 'Factory' | 'MainModule' | 'MainModuleUpgradable' | 'GuestModule' | 'SequenceUtils' | 'MainModuleGasEstimation';

/** Where production has each contract (MainModuleGasEstimation has no production address). */
const PRODUCTION_ADDRESS: Record<Exclude<SequenceContractName, 'MainModuleGasEstimation'>, Address> = {
  Factory: SEQUENCE_V2_CONTEXT.factory,
  MainModuleUpgradable: SEQUENCE_V2_CONTEXT.mainModuleUpgradable,
  MainModule: SEQUENCE_V2_CONTEXT.mainModule,
  GuestModule: SEQUENCE_V2_CONTEXT.guestModule,
  SequenceUtils: SEQUENCE_V2_CONTEXT.utils,
};

const DEPLOY_ORDER: SequenceContractName[] = ['Factory', 'MainModuleUpgradable', 'MainModule', 'GuestModule', 'SequenceUtils', 'MainModuleGasEstimation'];

/**
 * The creation bytecode (without constructor arguments) that @0xsequence/wallet-contracts@2.0.0
 * ships in its typechain factories. This is the bytecode deployed in production.
 */
export const loadSequenceBytecode = (name: SequenceContractName): Hex => sequenceCreationCode(name);

/**
 * The full initcode for CREATE2. Only MainModule has constructor arguments: `(factory,
 * mainModuleUpgradable)`, which it bakes in to derive wallet addresses and to know where upgrades go;
 * the production deployment passed the production Factory and MainModuleUpgradable.
 */
export function sequenceInitCode(name: SequenceContractName): Hex {
  const bytecode = loadSequenceBytecode(name);
  if (name !== 'MainModule') return bytecode;
  return concat([bytecode, encodeAbiParameters([{ type: 'address' }, { type: 'address' }], [SEQUENCE_V2_CONTEXT.factory, SEQUENCE_V2_CONTEXT.mainModuleUpgradable])]);
}

const ZERO_SALT: Hash = pad('0x', { size: 32 });

/** Where the singleton factory puts `initCode` with salt 0. */
export function singletonAddress(initCode: Hex): Address {
  return getContractAddress({ opcode: 'CREATE2', from: SINGLETON_FACTORY, salt: ZERO_SALT, bytecode: initCode });
}

/** Address of every contract deploySequenceV2Context installs, MainModuleGasEstimation included. */
export function sequenceContractAddresses(): Record<SequenceContractName, Address> {
  const out = {} as Record<SequenceContractName, Address>;
  for (const name of DEPLOY_ORDER) {
    const computed = singletonAddress(sequenceInitCode(name));
    const expected = name === 'MainModuleGasEstimation' ? undefined : PRODUCTION_ADDRESS[name];
    if (expected && computed !== getAddress(expected)) {
      throw new Error(
        `${name}: the bytecode of @0xsequence/wallet-contracts gives ${computed} through the singleton factory, ` + `not the production address ${expected}; is the installed package version 2.0.0?`,
      );
    }
    out[name] = computed;
  }
  return out;
}

export interface DeployedSequenceV2Context extends SequenceV2Context {
  walletCreationCode: Hex;
  /** MainModule variant that skips signature and nonce checks, for gas estimation via state overrides. */
  mainModuleGasEstimation: Address;
  /** Contracts this call deployed (empty when everything was already there). */
  deployed: SequenceContractName[];
}

type BatchCall = { method: string; params: unknown[] };

// One HTTP round trip for many calls; anvil answers a JSON-RPC batch in request order, but ids are
// matched anyway.
async function rpcBatch(url: string, calls: BatchCall[]): Promise<unknown[]> {
  if (calls.length === 0) return [];
  const res = await fetch(url, {
    method: 'POST',
    headers: { 'content-type': 'application/json' },
    body: JSON.stringify(calls.map((c, id) => ({ jsonrpc: '2.0', id, method: c.method, params: c.params }))),
    signal: AbortSignal.timeout(30_000),
  });
  if (!res.ok) throw new RpcError(`JSON-RPC batch at ${url}: HTTP ${res.status}`);
  const body = (await res.json()) as Array<{ id: number; result?: unknown; error?: { message: string; code?: number; data?: unknown } }>;
  if (!Array.isArray(body)) throw new RpcError(`JSON-RPC batch at ${url}: the node did not answer with a batch`);
  const byId = new Map(body.map((r) => [r.id, r]));
  return calls.map((c, id) => {
    const r = byId.get(id);
    if (!r) throw new RpcError(`${c.method} at ${url}: no answer in the batch`);
    if (r.error) throw new RpcError(`${c.method} at ${url}: ${r.error.message}`, r.error.code, r.error.data);
    return r.result;
  });
}

const hasCode = (code: unknown) => typeof code === 'string' && code !== '0x' && code !== '0x0';

// The deployments come from an impersonated address of our own rather than an anvil default account,
// so they never race the nonces of whoever else uses those accounts (sample deployment, tests).
const DEPLOYER: Address = '0x5e0c0de7000000000000000000000000000de710';
const DEPLOYER_BALANCE = toHex(10n ** 21n);
const RECEIPT_TIMEOUT_MS = 30_000;

/**
 * Installs the Sequence v2 contracts on an anvil node at their production addresses. Contracts that
 * already have code are skipped, so it is idempotent; everything missing is estimated together, sent in
 * nonce order and awaited together (in one block with automine off). Throws naming the contract whose
 * address still has no code afterwards.
 */
export async function deploySequenceV2Context(rpcUrl: string): Promise<DeployedSequenceV2Context> {
  const addresses = sequenceContractAddresses();
  const codes = await rpcBatch(rpcUrl, [
    { method: 'eth_getCode', params: [SINGLETON_FACTORY, 'latest'] },
    { method: 'eth_getCode', params: [ANVIL_CREATE2_DEPLOYER, 'latest'] },
    ...DEPLOY_ORDER.map((n) => ({ method: 'eth_getCode', params: [addresses[n], 'latest'] })),
  ]);
  const [singletonCode, create2Code, ...contractCodes] = codes;
  const missing = DEPLOY_ORDER.filter((_, i) => !hasCode(contractCodes[i]));
  const outcome: Partial<Record<SequenceContractName, string>> = {};

  if (missing.length > 0) {
    const setup: BatchCall[] = [
      { method: 'anvil_impersonateAccount', params: [DEPLOYER] },
      { method: 'anvil_setBalance', params: [DEPLOYER, DEPLOYER_BALANCE] },
    ];
    if (!hasCode(singletonCode)) {
      if (!hasCode(create2Code)) {
        throw new Error(
          `no CREATE2 deployer code at ${ANVIL_CREATE2_DEPLOYER} to install as the singleton factory ` + `${SINGLETON_FACTORY}; is ${rpcUrl} an anvil node with its default CREATE2 deployer?`,
        );
      }
      setup.push({ method: 'anvil_setCode', params: [SINGLETON_FACTORY, create2Code] });
    }
    setup.push({ method: 'eth_getTransactionCount', params: [DEPLOYER, 'pending'] });
    const txs = missing.map((name) => ({
      name,
      tx: { from: DEPLOYER, to: SINGLETON_FACTORY, data: concat([ZERO_SALT, sequenceInitCode(name)]) },
    }));
    const setupResults = await rpcBatch(rpcUrl, [...setup, ...txs.map(({ tx }) => ({ method: 'eth_estimateGas', params: [tx] }))]);
    const startNonce = Number(setupResults[setup.length - 1] as Hex);
    const gas = setupResults.slice(setup.length) as Hex[];

    // One at a time, in nonce order: a batch's sends reach anvil's pool in any order, and automine can
    // then leave a transaction whose predecessor came after it in the pool for good (foundry-rs/foundry#10122:
    // a deployment here waited its whole 30 s under load). Six round trips on a local node.
    const hashes: Hash[] = [];
    for (const [i, { tx }] of txs.entries()) {
      const [hash] = (await rpcBatch(rpcUrl, [
        {
          method: 'eth_sendTransaction',
          // The proxy forwards with CALL, so a tight estimate can leave the inner CREATE2 short.
          params: [{ ...tx, gas: toHex((BigInt(gas[i]!) * 13n) / 10n), nonce: toHex(startNonce + i) }],
        },
      ])) as Hash[];
      hashes.push(hash!);
    }
    const statuses = await waitForReceipts(rpcUrl, hashes);
    txs.forEach(({ name }, i) => (outcome[name] = `transaction ${hashes[i]} ${statuses[i] === '0x1' ? 'succeeded' : 'reverted'}`));
  }

  const after = await rpcBatch(
    rpcUrl,
    DEPLOY_ORDER.map((n) => ({ method: 'eth_getCode', params: [addresses[n], 'latest'] })),
  );
  const absent = DEPLOY_ORDER.filter((_, i) => !hasCode(after[i]));
  if (absent.length > 0) {
    throw new Error(`Sequence v2 deployment failed on ${rpcUrl}: no code at ` + absent.map((n) => `${n} ${addresses[n]}${outcome[n] ? ` (its deployment ${outcome[n]})` : ''}`).join(', '));
  }
  return {
    ...SEQUENCE_V2_CONTEXT,
    walletCreationCode: WALLET_CREATION_CODE,
    mainModuleGasEstimation: addresses.MainModuleGasEstimation,
    deployed: missing,
  };
}

// A reverted deployment is not an error here: a concurrent caller may have deployed the same
// contract first. The code check that follows decides.
/** Waits for every transaction; returns their receipt statuses in order. */
async function waitForReceipts(rpcUrl: string, hashes: Hash[]): Promise<Hex[]> {
  const deadline = Date.now() + RECEIPT_TIMEOUT_MS;
  const status = new Map<Hash, Hex>();
  let pending = hashes;
  for (let round = 0; pending.length > 0; round++) {
    if (round > 0) await new Promise((r) => setTimeout(r, 50));
    const receipts = (await rpcBatch(
      rpcUrl,
      pending.map((h) => ({ method: 'eth_getTransactionReceipt', params: [h] })),
    )) as Array<{ status: Hex } | null>;
    receipts.forEach((r, i) => r && status.set(pending[i]!, r.status));
    pending = pending.filter((h) => !status.has(h));
    // anvil's automine has been seen to leave a transaction pending on a loaded machine (the cause of a
    // flaky 30 s wait in CI): every 2 s without progress, a block is mined to take what the pool holds.
    // Its base fee is set to zero first: the deployments fill blocks, each full block raises the base
    // fee, and a transaction priced when the batch was sent can fall under it and wait forever.
    if (pending.length > 0 && round > 0 && round % 40 === 0) {
      await rpcBatch(rpcUrl, [
        { method: 'anvil_setNextBlockBaseFeePerGas', params: ['0x0'] },
        { method: 'evm_mine', params: [] },
      ]).catch(() => undefined);
    }
    if (pending.length > 0 && Date.now() > deadline) {
      // What anvil holds of them, so a failure says why they wait (gone from the pool, a nonce gap, under the base fee).
      const seen = await rpcBatch(rpcUrl, [
        ...pending.map((h) => ({ method: 'eth_getTransactionByHash', params: [h] })),
        { method: 'eth_getTransactionCount', params: [DEPLOYER, 'latest'] },
        { method: 'eth_getBlockByNumber', params: ['latest', false] },
        { method: 'txpool_status', params: [] },
      ]).catch((err: Error) => [err.message]);
      throw new Error(`Sequence v2 deployment transactions not mined within ${RECEIPT_TIMEOUT_MS / 1000} s: ${pending.join(', ')}; anvil: ${JSON.stringify(seen).slice(0, 2_000)}`);
    }
  }
  return hashes.map((h) => status.get(h)!);
}
