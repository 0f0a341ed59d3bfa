// The precondition pool's fair shares (issue 54, finding 6): a project's key is public, and free sponsored
// meta-transactions waiting on a condition that never holds, sent from three addresses, filled the
// project's share for an hour; every other user of the dapp got 409. Now each client network holds a part
// of the share, and such rows of wallets with no history wait a shorter time. Judged by another user of
// the same key (another client network): its meta-transaction is accepted and runs on chain once its
// precondition holds; and by the stored rows.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { encodeFunctionData, parseAbi, type Address } from 'viem';
import { privateKeyToAccount } from 'viem/accounts';
import { ANVIL_DEPLOYER_KEY } from '../src/devchain/index.ts';
import { erc20, sponsor, startRelayerEnv, type RelayerEnv } from './support/relayer-env.ts';
import { scrape } from './support/service.ts';
import { newSigner, signedBundle, walletFor } from './support/sequence-wallet.ts';

const DEPLOYER = privateKeyToAccount(ANVIL_DEPLOYER_KEY).address;
const allowanceAbi = parseAbi(['function allowance(address owner, address spender) view returns (uint256)']);

let env: RelayerEnv;
let other: Address;

beforeAll(async () => {
  env = await startRelayerEnv({
    // The project's share is 20; a client network's part of it 20 %: 4. Fresh sponsored wallets wait 60 s.
    relayer: {
      maxPendingPreconditions: 100,
      maxPendingPreconditionsPerProject: 20,
      pendingPreconditionsPerClientPercent: 20,
      preconditionTimeoutSec: 600,
      newWalletSponsoredPreconditionTimeoutSec: 60,
    },
  });
  [other] = await env.chain.deploy([{ contract: 'DevERC20', args: ['Other', 'OTH'] }]);
  await sponsor(env, 'CONTRACT', other);
}, 120_000);
afterAll(async () => {
  await env?.close();
});

/** SendMetaTxn with the project's key from `from` (the client address the server sees). */
async function send(from: string, body: unknown) {
  const res = await env.app.inject({
    method: 'POST',
    url: `/relayer/${env.chain.chainConfig.name}/rpc/Relayer/SendMetaTxn`,
    remoteAddress: from,
    headers: { 'content-type': 'application/json', 'x-access-key': env.accessKey },
    payload: JSON.stringify(body),
  });
  return { status: res.statusCode, body: JSON.parse(res.body) };
}

/** A sponsored bundle of a new wallet (an approve on the sponsored token) that waits until the wallet holds `min` of it. */
async function waiter(min: bigint) {
  const s = newSigner();
  const wallet = walletFor(s.address);
  const txs = [{ to: other, data: encodeFunctionData({ abi: erc20, functionName: 'approve', args: [DEPLOYER, 7n] }) }];
  const b = await signedBundle({ signerKey: s.privateKey, wallet, chainId: env.chainId, txs, deployed: false });
  const body = {
    call: { walletAddress: wallet.address, contract: b.entrypoint, input: b.input },
    preconditions: [{ type: 'erc20-balance', chainId: env.chainId, ownerAddress: wallet.address, tokenAddress: other, minAmount: min.toString() }],
  };
  return { wallet: wallet.address, id: b.id.slice(2).toLowerCase(), body };
}

describe('the precondition pool: a client network holds its part of its project share', () => {
  it('three addresses filling the pool with never-true sponsored rows leave another user of the key its place; its row runs once its precondition holds', async () => {
    // The attacker: three client networks, each sending until refused (at most the project's share).
    const accepted: string[] = [];
    const refusals: string[] = [];
    for (const from of ['10.0.1.5', '10.0.2.5', '10.0.3.5']) {
      for (let i = 0; i < 20; i++) {
        const w = await waiter(10n ** 30n);
        const r = await send(from, w.body);
        if (r.status !== 200) {
          expect(r.status).toBe(409);
          refusals.push(r.body.cause);
          break;
        }
        accepted.push(w.id);
      }
    }
    // Another user of the same key, from its own network: accepted, and relayed once its condition holds.
    const victim = await waiter(1n);
    const r = await send('10.0.9.5', victim.body);
    expect(r.status, JSON.stringify(r.body)).toBe(200);
    await env.chain.send([{ address: other, contract: 'DevERC20', functionName: 'mint', args: [victim.wallet, 1n] }]);
    let allowance = 0n;
    for (let i = 0; i < 300 && allowance !== 7n; i++) {
      allowance = (await env.public.readContract({ address: other, abi: allowanceAbi, functionName: 'allowance', args: [victim.wallet, DEPLOYER] })) as bigint;
      if (allowance !== 7n) await new Promise((done) => setTimeout(done, 100));
    }
    expect(allowance).toBe(7n);

    expect(accepted).toHaveLength(12);
    expect(refusals[0]).toMatch(
      /client network 10\.0\.1\.0\/24 already has 4 meta-transactions waiting on preconditions on this chain \(its part of its project's share: pendingPreconditionsPerClientPercent\)/,
    );

    // Their rows wait the short time of sponsored rows of wallets that never ran a transaction.
    const waits = await env.services.db.query<{ secs: number }>(
      `SELECT extract(epoch FROM w.deadline - m.queued_at)::float8 AS secs FROM meta_txn_waits w JOIN meta_txns m ON m.chain_id = w.chain_id AND m.id = w.meta_txn_id WHERE m.id = ANY($1)`,
      [accepted],
    );
    expect(waits.rows).toHaveLength(12);
    expect(waits.rows.every((x) => x.secs > 50 && x.secs < 70)).toBe(true);

    expect(await scrape(env.app)).toMatch(/metarelay_relayer_precondition_refused_total\{chain="[^"]+",share="client"\} 3/);
  });
});
