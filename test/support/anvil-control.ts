// Test helpers steering a running anvil: mining, fees, the mempool, snapshots, and a restart that keeps
// the chain. Raw JSON-RPC (rpcCall), straight at anvil: point these at the node, not at an rpc-proxy.
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { gunzipSync } from 'node:zlib';
import { startAnvil, type AnvilHandle, type StartAnvilOptions } from '../../src/devchain/anvil.ts';
import { rpcCall } from '../../src/devchain/rpc.ts';

const hex = (n: number | bigint) => `0x${BigInt(n).toString(16)}`;

/** Automine on: a block per transaction. Off: transactions wait in the mempool until `mine`. */
export async function setAutomine(url: string, on: boolean): Promise<void> {
  await rpcCall(url, 'evm_setAutomine', [on]);
}

/** Mines `blocks` blocks now (with whatever the mempool holds). */
export async function mine(url: string, blocks = 1): Promise<void> {
  await rpcCall(url, 'anvil_mine', [hex(blocks)]);
}

/**
 * Base fee of the next block; the one after follows EIP-1559 from there. Note anvil does not keep a
 * pending transaction whose maxFeePerGas is below the base fee waiting (geth would): mining that
 * block evicts it from the pool, as if dropped.
 */
export async function setNextBaseFee(url: string, wei: bigint | number): Promise<void> {
  await rpcCall(url, 'anvil_setNextBlockBaseFeePerGas', [hex(wei)]);
}

/** Removes a pending transaction from the mempool. True if it was there. */
export async function dropTransaction(url: string, hash: string): Promise<boolean> {
  return (await rpcCall<string | null>(url, 'anvil_dropTransaction', [hash])) !== null;
}

/** evm_snapshot; the id is for one `revert` (anvil forgets a snapshot once reverted to). */
export async function snapshot(url: string): Promise<string> {
  return rpcCall<string>(url, 'evm_snapshot', []);
}

/** evm_revert to a snapshot id; throws if anvil does not know the id. */
export async function revert(url: string, id: string): Promise<void> {
  if (!(await rpcCall<boolean>(url, 'evm_revert', [id]))) throw new Error(`evm_revert: unknown snapshot ${id}`);
}

export interface TxpoolTx {
  hash: string;
  from: string;
  to: string | null;
  nonce: string;
  [field: string]: unknown;
}

/** txpool_content: pending (executable) and queued (nonce gap) transactions, by sender address then nonce (decimal string). */
export interface TxpoolContent {
  pending: Record<string, Record<string, TxpoolTx>>;
  queued: Record<string, Record<string, TxpoolTx>>;
}

export async function txpoolContent(url: string): Promise<TxpoolContent> {
  return rpcCall<TxpoolContent>(url, 'txpool_content', []);
}

/** Hashes of every transaction in the mempool (pending and queued). */
export function txpoolHashes(content: TxpoolContent): string[] {
  return [content.pending, content.queued].flatMap((bySender) => Object.values(bySender).flatMap((byNonce) => Object.values(byNonce).map((tx) => tx.hash)));
}

export interface RestartAnvilOptions extends StartAnvilOptions {
  /**
   * Where the chain state is written between the two processes. Default: a fresh temporary
   * directory, removed once the new anvil has loaded it.
   */
  stateFile?: string;
}

/**
 * Stops anvil and starts a new one with the same chain: accounts (balances, nonces, code, storage),
 * blocks, transactions and receipts. The port usually changes (pass `port: handle.port` to ask for
 * the old one), hence RpcProxy.setUpstream.
 *
 * How: the state is taken from the live node with `anvil_dumpState` (gzipped JSON, the same
 * document `--dump-state` writes on exit, so this works whether or not the node was started with
 * `--state`), written unzipped to a file, and the new process is started with `--load-state <file>`.
 *
 * What does NOT survive: the mempool. Pending and queued transactions are not in the dump and are
 * gone after the restart (as after a real node crash that loses its pool) — a relayer must
 * rebroadcast them. Nor do runtime switches: automine/interval mining come from `opts.blockTime`
 * again (default 1 s, as startAnvil), and impersonations, snapshots and a set next base fee are
 * forgotten (the base fee goes on by EIP-1559 from the last block). Pass the StartAnvilOptions the
 * node was first started with; chainId defaults to the handle's. The old handle is stopped.
 */
export async function restartAnvil(handle: AnvilHandle, opts: RestartAnvilOptions = {}): Promise<AnvilHandle> {
  const { stateFile, ...startOpts } = opts;
  const dump = await rpcCall<string>(handle.rpcUrl, 'anvil_dumpState', []);
  const tmpDir = stateFile ? undefined : mkdtempSync(path.join(tmpdir(), 'metarelay-anvil-state-'));
  const file = stateFile ?? path.join(tmpDir!, 'state.json');
  try {
    writeFileSync(file, gunzipSync(Buffer.from(dump.replace(/^0x/, ''), 'hex')));
    await handle.stop();
    return await startAnvil({
      ...startOpts,
      chainId: startOpts.chainId ?? handle.chainId,
      args: [...(startOpts.args ?? []), '--load-state', file],
    });
  } finally {
    if (tmpDir) rmSync(tmpDir, { recursive: true, force: true });
  }
}
