// Many wallets and many signed bundles for the relayer's fault and load tests: wallets are deployed in
// one guest-module transaction from a funded anvil account, then each bundle mints one test token.

import { createWalletClient, encodeFunctionData, http, type Address, type Hex } from 'viem';
import { privateKeyToAccount } from 'viem/accounts';
import { sequenceFactoryAbi, newSigner, signedBundle, walletFor, type SequenceTestWallet, type SignedBundle, type TestSigner } from './sequence-wallet.ts';
import { SEQUENCE_V2_CONTEXT } from '../../src/relayer/context.ts';
import { walletAbi } from '../../src/relayer/abi.ts';
import { FINAL_STATUSES } from '../../src/relayer/store.ts';
import { expect } from 'vitest';
import { readNonces } from '../../src/relayer/nonces.ts';
import { erc20, type RelayerEnv } from './relayer-env.ts';

/** What the end-of-run checks need: the database, the chain, the minted token. */
export type CheckEnv = Pick<RelayerEnv, 'services' | 'chainId' | 'public' | 'token'>;

/** anvil account 8: not a relayer sender, not the contract deployer. */
const FUNDER_KEY: Hex = '0xdbda1821b80551c9d65939329250298aa3472ba22feea921c0cf5d620ea67b97';

export interface User {
  signer: TestSigner;
  wallet: SequenceTestWallet;
}

export async function waitFor<T>(what: string, fn: () => Promise<T | undefined | false | null>, timeoutMs = 60_000, everyMs = 50): Promise<T> {
  const until = Date.now() + timeoutMs;
  for (;;) {
    const v = await fn();
    if (v) return v as T;
    if (Date.now() > until) throw new Error(`timed out waiting for ${what}`);
    await new Promise((r) => setTimeout(r, everyMs));
  }
}

/** Deploys `count` fresh 1-of-1 wallets directly through the factory (not through the relayer). */
export async function deployWallets(env: RelayerEnv, count: number): Promise<User[]> {
  const users = Array.from({ length: count }, () => {
    const signer = newSigner();
    return { signer, wallet: walletFor(signer.address) };
  });
  const client = createWalletClient({ account: privateKeyToAccount(FUNDER_KEY), transport: http(env.rpcUrl) });
  for (let i = 0; i < users.length; i += 50) {
    const txs = users.slice(i, i + 50).map((u) => ({
      delegateCall: false,
      revertOnError: true,
      gasLimit: 0n,
      target: SEQUENCE_V2_CONTEXT.factory,
      value: 0n,
      data: encodeFunctionData({ abi: sequenceFactoryAbi, functionName: 'deploy', args: [SEQUENCE_V2_CONTEXT.mainModule, u.wallet.imageHash] }),
    }));
    const hash = await client.sendTransaction({
      to: SEQUENCE_V2_CONTEXT.guestModule,
      data: encodeFunctionData({ abi: walletAbi, functionName: 'execute', args: [txs, 0n, '0x'] }),
      gas: 8_000_000n,
      chain: null,
    });
    await waitFor(`the wallet deployment ${hash}`, () => env.public.getTransactionReceipt({ hash }).catch(() => null), 60_000, 50);
  }
  return users;
}

export interface LoadItem {
  user: User;
  space: bigint;
  n: bigint;
  bundle: SignedBundle;
}

/** One bundle per (user, space, n): each mints one token of env.token to its wallet. */
export async function mintBundles(env: RelayerEnv, users: User[], spaces: number, perSpace = 1): Promise<LoadItem[]> {
  const items: Promise<LoadItem>[] = [];
  for (const user of users) {
    for (let s = 0; s < spaces; s++) {
      for (let n = 0; n < perSpace; n++) {
        const space = BigInt(s);
        items.push(
          signedBundle({
            signerKey: user.signer.privateKey,
            wallet: user.wallet,
            chainId: env.chainId,
            deployed: true,
            nonce: { space, n: BigInt(n) },
            txs: [{ to: env.token, data: encodeFunctionData({ abi: erc20, functionName: 'mint', args: [user.wallet.address, 1n] }) }],
          }).then((bundle) => ({ user, space, n: BigInt(n), bundle })),
        );
      }
    }
  }
  return Promise.all(items);
}

/** SendMetaTxn for every item, `concurrency` at a time; returns the meta-transaction ids. */
export async function sendAll(send: (item: LoadItem) => Promise<{ status: number; body: any }>, items: LoadItem[], concurrency = 8): Promise<string[]> {
  const ids: string[] = new Array(items.length);
  let next = 0;
  await Promise.all(
    Array.from({ length: concurrency }, async () => {
      while (next < items.length) {
        const i = next++;
        const r = await send(items[i]);
        if (r.status !== 200) throw new Error(`SendMetaTxn ${i} failed: ${r.status} ${JSON.stringify(r.body)}`);
        ids[i] = r.body.txnHash;
      }
    }),
  );
  return ids;
}

export function sendVia(env: RelayerEnv) {
  return (item: LoadItem) =>
    env.call('SendMetaTxn', { call: { walletAddress: item.user.wallet.address, contract: item.bundle.entrypoint, input: item.bundle.input } }, { 'x-access-key': env.accessKey });
}

/** Statuses of the given meta-transactions, read straight from the database. */
export async function statuses(env: Pick<RelayerEnv, 'services' | 'chainId'>, ids: string[]): Promise<Map<string, string>> {
  const r = await env.services.db.query<{ id: string; status: string }>('SELECT id, status FROM meta_txns WHERE chain_id = $1 AND id = ANY($2)', [env.chainId, ids.map((id) => id.replace(/^0x/, ''))]);
  return new Map(r.rows.map((x) => [x.id, x.status]));
}

export async function allFinal(env: Pick<RelayerEnv, 'services' | 'chainId'>, ids: string[], timeoutMs = 120_000) {
  return waitFor(
    `${ids.length} meta-transactions to be final`,
    async () => {
      const s = await statuses(env, ids);
      return s.size === ids.length && [...s.values()].every((x) => FINAL_STATUSES.has(x)) ? s : undefined;
    },
    timeoutMs,
    200,
  );
}

/** Per sender: the ledger's next nonce and the chain's latest/pending counts. */
export async function ledgerVsChain(env: Pick<RelayerEnv, 'services' | 'chainId' | 'public'>) {
  const r = await env.services.db.query<{ address: Address; next_nonce: string | null }>('SELECT address, next_nonce::text AS next_nonce FROM relay_senders WHERE chain_id = $1', [env.chainId]);
  return Promise.all(
    r.rows.map(async (x) => ({
      sender: x.address,
      ledger: x.next_nonce == null ? null : Number(x.next_nonce),
      latest: await env.public.getTransactionCount({ address: x.address, blockTag: 'latest' }),
      pending: await env.public.getTransactionCount({ address: x.address, blockTag: 'pending' }),
    })),
  );
}

/** Attempts (relay_txs rows) by status for the meta-transactions: how many were mined per id, etc. */
export async function minedPerMeta(env: Pick<RelayerEnv, 'services' | 'chainId'>): Promise<Map<string, number>> {
  const r = await env.services.db.query<{ id: string; n: string }>(
    `SELECT m.id, count(t.id)::text AS n FROM meta_txns m
     LEFT JOIN relay_txs t ON t.chain_id = m.chain_id AND t.sender = m.sender AND t.nonce = m.txn_nonce AND t.status IN ('MINED', 'CONFIRMED')
     WHERE m.chain_id = $1 GROUP BY m.id`,
    [env.chainId],
  );
  return new Map(r.rows.map((x) => [x.id, Number(x.n)]));
}

/** Mined attempts per sender must cover nonces 0..latest-1 of our senders without a hole or a repeat. */
export async function senderNoncesContiguous(env: Pick<RelayerEnv, 'services' | 'chainId' | 'public'>): Promise<{ sender: string; ok: boolean; detail: string }[]> {
  const out = [];
  for (const s of await ledgerVsChain(env)) {
    const r = await env.services.db.query<{ nonce: string; n: string }>(
      `SELECT nonce::text AS nonce, count(*)::text AS n FROM relay_txs WHERE chain_id = $1 AND sender = $2 AND status IN ('MINED', 'CONFIRMED') GROUP BY nonce ORDER BY nonce`,
      [env.chainId, s.sender],
    );
    const nonces = r.rows.map((x) => Number(x.nonce)).sort((a, b) => a - b);
    const repeats = r.rows.filter((x) => Number(x.n) > 1).map((x) => x.nonce);
    const first = nonces[0] ?? s.latest;
    const contiguous = nonces.every((n, i) => n === first + i) && (nonces.length === 0 || nonces.at(-1)! === s.latest - 1);
    out.push({ sender: s.sender, ok: contiguous && repeats.length === 0 && s.ledger === s.latest && s.pending === s.latest, detail: JSON.stringify({ ...s, first, count: nonces.length, repeats }) });
  }
  return out;
}

/** Nothing lost, nothing twice, the ledger equal to the chain, every wallet nonce consumed once. */
export async function expectClean(env: CheckEnv, ids: string[], users: User[], spaces: number) {
  const final = await allFinal(env, ids, 240_000);
  const counts = new Map<string, number>();
  for (const s of final.values()) counts.set(s, (counts.get(s) ?? 0) + 1);
  expect(Object.fromEntries(counts)).toEqual({ SUCCEEDED: ids.length });
  const mined = await minedPerMeta(env);
  expect(ids.filter((id) => mined.get(id.replace(/^0x/, '')) !== 1)).toEqual([]);
  // One signed call per (sender, nonce): replacements carry the same call, nothing else shares a nonce.
  const shared = await env.services.db.query(`SELECT sender, nonce FROM relay_txs WHERE chain_id = $1 AND status <> 'FAILED' GROUP BY sender, nonce HAVING count(DISTINCT data) > 1`, [env.chainId]);
  expect(shared.rows).toEqual([]);
  // A meta-transaction is carried by one slot only (a refused broadcast aside).
  const twice = await env.services.db.query(
    `SELECT meta_txn_id FROM relay_txs WHERE chain_id = $1 AND status <> 'FAILED' AND meta_txn_id IS NOT NULL GROUP BY meta_txn_id HAVING count(DISTINCT (sender, nonce)) > 1`,
    [env.chainId],
  );
  expect(twice.rows).toEqual([]);
  for (const s of await senderNoncesContiguous(env)) expect(s.ok, s.detail).toBe(true);
  const nonces = await readNonces(
    env.public as never,
    users.flatMap((u) => Array.from({ length: spaces }, (_, s) => ({ wallet: u.wallet.address, space: BigInt(s) }))),
  );
  expect(nonces.every((n) => n === 1n)).toBe(true);
  const balances = await Promise.all(users.map((u) => env.public.readContract({ address: env.token, abi: erc20, functionName: 'balanceOf', args: [u.wallet.address] })));
  expect(balances.every((b) => b === BigInt(spaces))).toBe(true);
}
