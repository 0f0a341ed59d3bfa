// Helpers for the refresh-task tests: RPC calls with a key, waiting for a task to end, and a
// DevERC721 with many tokens minted in a few batches.

import type { Address } from 'viem';
import { privateKeyToAccount } from 'viem/accounts';
import { expect } from 'vitest';
import { ANVIL_DEPLOYER_KEY, type OriginServer } from '../../src/devchain/index.ts';
import type { TaskStatus } from '../../src/metadata/refresh/task-store.ts';
import { rpc } from './service.ts';
import { eventually, type Api, type TokenChain } from './token-chain.ts';

export const DEPLOYER: Address = privateKeyToAccount(ANVIL_DEPLOYER_KEY).address;

/** The methods that write the project's state (its mint monitors): they take its secret key. */
const SECRET_METHODS = new Set(['AddContractToMintMonitor', 'RemoveContractFromMintMonitor']);

/** POST /rpc/Metadata/<method> with the caller's key: its secret key (where it has one) for the methods that take one. */
export function call(api: Api & { secretKey?: string }, method: string, body: unknown) {
  const key = SECRET_METHODS.has(method) ? (api.secretKey ?? api.accessKey) : api.accessKey;
  return rpc(api.app, `/rpc/Metadata/${method}`, body, { 'x-access-key': key });
}

/** Enqueues tokens through EnqueueTokensForRefresh; asserts HTTP 200 and returns the task id. */
export async function enqueue(api: Api, contract: string, tokenIDs: string[]): Promise<number> {
  const res = await call(api, 'EnqueueTokensForRefresh', { chainID: 'anvil', contractAddress: contract, tokenIDs });
  if (res.status !== 200) throw new Error(`EnqueueTokensForRefresh answered ${res.status}: ${JSON.stringify(res.body)}`);
  expect(typeof res.body.taskId).toBe('number');
  return res.body.taskId as number;
}

export async function statusOf(api: Api, taskId: number): Promise<TaskStatus> {
  const res = await call(api, 'GetTokenRefreshStatus', { taskId });
  if (res.status !== 200) throw new Error(`GetTokenRefreshStatus answered ${res.status}: ${JSON.stringify(res.body)}`);
  return res.body.status as TaskStatus;
}

/** Polls GetTokenRefreshStatus until the task is no longer QUEUED; returns the final status. */
export async function waitForEnd(api: Api, taskId: number, timeoutMs = 30_000): Promise<TaskStatus> {
  return eventually(
    () => statusOf(api, taskId),
    (s) => expect(s).not.toBe('QUEUED'),
    timeoutMs,
  );
}

export interface RefreshResult {
  status: TaskStatus;
  tokens: Record<string, boolean>;
  failureReasons: Record<string, string>;
}

export async function resultOf(api: Api, taskId: number): Promise<RefreshResult> {
  const res = await call(api, 'GetTokenRefreshResult', { taskId });
  if (res.status !== 200) throw new Error(`GetTokenRefreshResult answered ${res.status}: ${JSON.stringify(res.body)}`);
  return res.body as RefreshResult;
}

export const range = (from: number, to: number) => Array.from({ length: to - from + 1 }, (_, i) => String(from + i));

/**
 * A DevERC721 (not Enumerable) whose tokenURI is `${origin.url}${prefix}<id>`, with `ids` minted to
 * the deployer, 250 transactions per batch.
 */
export async function erc721WithTokens(chain: TokenChain, origin: Pick<OriginServer, 'url'>, prefix: string, ids: string[]): Promise<Address> {
  const [address] = await chain.deploy([{ contract: 'DevERC721', args: ['Refresh Test', 'RT', `${origin.url}${prefix}`, ''] }]);
  for (let i = 0; i < ids.length; i += 250) {
    await chain.send(ids.slice(i, i + 250).map((id) => ({ address, contract: 'DevERC721', functionName: 'mint', args: [DEPLOYER, BigInt(id)] })));
  }
  return address.toLowerCase() as Address;
}

/** Requests the origin received for each of these paths. */
export const countsFor = (origin: Pick<OriginServer, 'requestCount'>, paths: string[]) => paths.map((p) => origin.requestCount(p));
