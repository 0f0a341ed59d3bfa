// Issue #34, the rest of the Sequence API: the shapes typed clients decode and the indexer methods added,
// called through the official clients (@0xsequence/indexer, @0xsequence/relayer, @0xsequence/metadata)
// against a real relayer and indexer on one anvil.
import { SequenceIndexer, TransactionType, type TransactionReceipt } from '@0xsequence/indexer';
import { SequenceMetadata } from '@0xsequence/metadata';
import { RpcRelayerProto as proto } from '@0xsequence/relayer';
import { encodeFunctionData, parseAbi, type Hash, type Hex } from 'viem';
import { privateKeyToAccount } from 'viem/accounts';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { devWalletClient } from '../src/devchain/index.ts';
import type { ChainIndexer } from '../src/indexer/index.ts';
import { toWire } from '../src/metadata/tokens/token-view.ts';
import { erc20, sponsor, startRelayerEnv, type RelayerEnv } from './support/relayer-env.ts';
import { newSigner, officialWallet } from './support/sequence-wallet.ts';
import { catchUp } from './support/catch-up.ts';

/** anvil's accounts 3 and 4: neither deploys nor relays in this environment, so their nonces are their own. */
const MINTER = privateKeyToAccount('0x7c852118294e51e653712a81e05800f419141751be58f605c371e15141b007a6');
const DELEGATOR = privateKeyToAccount('0x47e179ec197488593b187f80a00eb0da91f1b9d0b13f8733639f19c30a34926a');
const nft = parseAbi(['function mint(address to, uint256 id)', 'function ownerOf(uint256) view returns (address)']);

let env: RelayerEnv;
let indexer: SequenceIndexer;
let relayer: proto.Relayer;
let ix: ChainIndexer;
const admin = () => ({ authorization: `Bearer ${env.adminToken}` });

/** The webrpc error a client call rejected with. */
async function refusal(p: Promise<unknown>): Promise<{ name: string; status: number; cause?: string; message: string }> {
  try {
    await p;
  } catch (err) {
    return err as { name: string; status: number; cause?: string; message: string };
  }
  throw new Error('the call was not refused');
}

beforeAll(async () => {
  env = await startRelayerEnv({ indexer: { scope: 'all', fromBlock: 0, confirmations: 0, chunkBlocks: 50, pollMs: 50 } });
  ix = env.services.indexers.get(env.chainId)!;
  indexer = new SequenceIndexer(`${env.baseUrl}/indexer/${env.chain.chainConfig.name}`, env.accessKey);
  relayer = new proto.Relayer(env.relayerUrl, fetch);
}, 120_000);
afterAll(async () => {
  await env?.close();
});

describe('shapes typed clients decode', () => {
  it('RuntimeStatus.checks is an object on every service (the relayer schema types it RuntimeChecks)', async () => {
    const { status } = await relayer.runtimeStatus(admin());
    expect(typeof status.checks).toBe('object');
    expect(Array.isArray(status.checks)).toBe(false);
    expect((status.checks as Record<string, { ok: boolean }>).database).toMatchObject({ ok: true });
    const meta = await new SequenceMetadata(env.baseUrl, env.accessKey).runtimeStatus();
    expect(Array.isArray((meta.status as unknown as { checks: unknown }).checks)).toBe(false);
    const ixStatus = await indexer.runtimeStatus({});
    expect(Array.isArray(ixStatus.status.checks)).toBe(false);
  });

  it('the relayer Version carries the schema hash whole, as the generated client has it', async () => {
    const { version } = await relayer.version();
    expect(version.schemaHash).toBe(proto.WebrpcSchemaHash);
    expect(version.schemaVersion).toBe(proto.WebrpcSchemaVersion);
  });

  it('GasSponsor has deletedAt; admin methods ignore fields they do not know and name them, but refuse a known field of the wrong type', async () => {
    const address = newSigner().address;
    const added = await env.call('AddGasSponsor', { projectId: env.project.id, address, name: 'newer client', fieldFromANewerSchema: { x: 1 } }, admin());
    expect(added.status, JSON.stringify(added.body)).toBe(200);
    expect(added.body.ignoredFields).toEqual(['fieldFromANewerSchema']);
    const { gasSponsors } = await relayer.listGasSponsors({ projectId: env.project.id }, admin());
    const mine = gasSponsors.find((g) => g.address === address.toLowerCase());
    expect(mine).toBeDefined();
    expect(mine).toHaveProperty('deletedAt', null);
    for (const key of ['id', 'gasTankId', 'projectId', 'ecosystemId', 'chainId', 'address', 'name', 'active', 'webhookUrl', 'webhookAuthToken', 'updatedAt', 'createdAt'])
      expect(mine).toHaveProperty(key);
    const wrongType = await env.call('AddGasSponsor', { projectId: env.project.id, address: newSigner().address, name: 5 }, admin());
    expect(wrongType.status).toBe(400);
    expect(wrongType.body).toMatchObject({ error: 'InvalidArgument' });
    expect(wrongType.body.cause).toMatch(/name/);
  });

  it('TokenMetadata.attributes is a list, never null, whether the document had them or not', () => {
    const at = new Date();
    const rec = { metadata: { name: 'plain' }, source: 'FETCHER_ON_CHAIN_TOKEN_URI', updatedAt: at, lastFetched: at } as unknown as Parameters<typeof toWire>[3];
    expect(toWire(1, '0x01', '1', rec, 'AVAILABLE', null).attributes).toEqual([]);
    expect(toWire(1, '0x01', '2', undefined, 'NOT_AVAILABLE', null).attributes).toEqual([]);
  });

  it('GetEtherBalance without accountAddress is a clear InvalidArgument; with it, the chain balance', async () => {
    const err = await refusal(indexer.getEtherBalance({}));
    expect(err.status).toBe(400);
    expect(err.cause).toMatch(/accountAddress: required .*no wallet sessions/);
    const { balance } = await indexer.getEtherBalance({ accountAddress: MINTER.address });
    expect(BigInt(balance.balanceWei)).toBe(await env.public.getBalance({ address: MINTER.address }));
  });

  it('a type-4 (EIP-7702) transaction is reported as DynamicFeeTxnType, inside the schema enum', async () => {
    const wallet = devWalletClient(env.rpcUrl, env.chainId, DELEGATOR);
    const authorization = await wallet.signAuthorization({ contractAddress: env.token, executor: 'self' });
    const hash = await wallet.sendTransaction({ to: newSigner().address, data: '0x', authorizationList: [authorization] });
    const mined = await env.public.waitForTransactionReceipt({ hash });
    expect(mined.type).toBe('eip7702');
    const { receipt } = await indexer.fetchTransactionReceipt({ txnHash: hash });
    expect(receipt.txnType).toBe(TransactionType.DynamicFeeTxnType);
    expect(Object.values(TransactionType)).toContain(receipt.txnType);
  });
});

describe('indexer methods', () => {
  it('GetTokenIDRanges: runs of held ids, continuing after lastTokenID; the ids are the chain owners', async () => {
    const [collection] = await env.chain.deploy([{ contract: 'TestIndexERC721' }]);
    const holder = newSigner().address;
    const ids = [1n, 2n, 3n, 7n, 8n, 10n];
    await env.chain.send(ids.map((id) => ({ address: collection!, contract: 'TestIndexERC721', functionName: 'mint', args: [holder, id] })));
    await catchUp(ix, () => env.public.getBlockNumber());
    for (const id of ids) expect(await env.public.readContract({ address: collection!, abi: nft, functionName: 'ownerOf', args: [id] })).toBe(holder);
    const all = await indexer.getTokenIDRanges({ contractAddress: collection! });
    expect(all).toEqual({
      contractType: 'ERC721',
      tokenIDRanges: [
        { start: '1', end: '3' },
        { start: '7', end: '8' },
        { start: '10', end: '10' },
      ],
      moreRanges: false,
    });
    const after = await indexer.getTokenIDRanges({ contractAddress: collection!, lastTokenID: '7' });
    expect(after.tokenIDRanges).toEqual([
      { start: '8', end: '8' },
      { start: '10', end: '10' },
    ]);
    const none = await indexer.getTokenIDRanges({ contractAddress: newSigner().address });
    expect(none).toEqual({ contractType: 'UNKNOWN', tokenIDRanges: [], moreRanges: false });
  });

  it('FetchTransactionReceiptWithFilter waits for the first receipt matching from, contract and event; by hash, only when the rest match', async () => {
    const minter = devWalletClient(env.rpcUrl, env.chainId, MINTER);
    const to = newSigner().address;
    const waiting = indexer.fetchTransactionReceiptWithFilter({
      filter: { from: MINTER.address, contractAddress: env.token, event: 'Transfer(address indexed from, address indexed to, uint256 value)' },
      maxBlockWait: 20,
    });
    const hash = await minter.writeContract({ address: env.token, abi: erc20, functionName: 'mint', args: [to, 5n] });
    const { receipt } = await waiting;
    expectReceipt(receipt, hash);
    expect(receipt.from).toBe(MINTER.address.toLowerCase());
    expect(receipt.logs.some((l) => l.contractAddress === env.token.toLowerCase())).toBe(true);

    const byHash = await indexer.fetchTransactionReceiptWithFilter({ filter: { txnHash: hash, to: env.token } });
    expectReceipt(byHash.receipt, hash);
    const otherSender = await refusal(indexer.fetchTransactionReceiptWithFilter({ filter: { txnHash: hash, from: to } }));
    expect(otherSender).toMatchObject({ name: 'NotFound' });
    // Nothing matches in the head block and no block is waited for.
    expect(await refusal(indexer.fetchTransactionReceiptWithFilter({ filter: { from: to }, maxBlockWait: 0 }))).toMatchObject({ name: 'NotFound' });
    const empty = await refusal(indexer.fetchTransactionReceiptWithFilter({ filter: {} }));
    expect(empty.status).toBe(400);
    expect(empty.cause).toMatch(/at least one of txnHash/);
    const badEvent = await refusal(indexer.fetchTransactionReceiptWithFilter({ filter: { event: 'not an event' } }));
    expect(badEvent.cause).toMatch(/event signature/);
  });

  it('a relayed transaction in the history names its meta-transaction; filter.metaTransactionIDs finds it', async () => {
    await sponsor(env, 'CONTRACT', env.token);
    const w = officialWallet({ signerKey: newSigner().privateKey, rpcUrl: env.rpcUrl, chainId: env.chainId, relayerUrl: env.relayerUrl, projectAccessKey: env.accessKey });
    try {
      const to = newSigner().address;
      await env.chain.send([{ address: env.token, contract: 'DevERC20', functionName: 'mint', args: [w.address, 100n] }]);
      const sent = await w.sendTransaction([{ to: env.token, data: encodeFunctionData({ abi: erc20, functionName: 'transfer', args: [to, 40n] }) }]);
      const { receipt: relayed } = await relayer.getMetaTxnReceipt({ metaTxID: sent.id });
      expect(relayed.txnHash).toBe(sent.hash);
      await catchUp(ix, () => env.public.getBlockNumber());

      const { transactions } = await indexer.getTransactionHistory({ filter: { accountAddress: to } });
      expect(transactions).toHaveLength(1);
      expect(transactions[0]).toMatchObject({ txnHash: sent.hash, metaTxnID: relayed.id });
      // Transfers the relayer did not carry name no meta-transaction.
      const minted = await indexer.getTransactionHistory({ filter: { accountAddress: w.address } });
      expect(minted.transactions.map((t) => t.metaTxnID ?? null)).toEqual([relayed.id, null]);

      for (const id of [relayed.id, sent.id, `0x${relayed.id.replace(/^0x/, '').toUpperCase()}`]) {
        const found = await indexer.getTransactionHistory({ filter: { metaTransactionIDs: [id] } });
        expect(found.transactions.map((t) => t.txnHash)).toEqual([sent.hash]);
      }
      const unknown = await indexer.getTransactionHistory({ filter: { metaTransactionIDs: [`0x${'ab'.repeat(32)}`] } });
      expect(unknown.transactions).toEqual([]);
      // With an account too: both must hold.
      const narrowed = await indexer.getTransactionHistory({ filter: { accountAddress: newSigner().address, metaTransactionIDs: [relayed.id] } });
      expect(narrowed.transactions).toEqual([]);
      const bad = await refusal(indexer.getTransactionHistory({ filter: { metaTransactionIDs: ['xyz'] } }));
      expect(bad.status).toBe(400);
      expect(bad.cause).toMatch(/meta-transaction id/);

      // GetMetaTransactions: includeNonSponsored false lists the sponsored ones only; true or left out, all of the project's.
      const feePaid = randomId();
      await insertFeePaid(feePaid, w.address, 77n);
      const listed = async (includeNonSponsored?: boolean) =>
        (
          await relayer.getMetaTransactions(
            { projectId: env.project.id, page: { pageSize: 100 } as proto.Page, ...(includeNonSponsored === undefined ? {} : { includeNonSponsored }) },
            { 'X-Access-Key': env.accessKey },
          )
        ).transactions;
      const sponsoredOnly = await listed(false);
      expect(sponsoredOnly.map((t) => t.metaTxnID)).toContain(relayed.id);
      expect(sponsoredOnly.map((t) => t.metaTxnID)).not.toContain(feePaid);
      expect(sponsoredOnly.every((t) => t.isWhitelisted)).toBe(true);
      for (const all of [await listed(true), await listed()]) expect(all.map((t) => t.metaTxnID)).toEqual(expect.arrayContaining([relayed.id, feePaid]));
    } finally {
      w.close();
    }
  });
});

/** A fee-paid meta-transaction of the project, stored as intake stores one: a call the token refuses (no such function), so the dispatcher's simulation reverts and nothing is signed. */
const insertFeePaid = (id: string, wallet: Hex, space: bigint) =>
  env.services.metaTxns.insert({
    chainId: env.chainId,
    id,
    projectId: env.project.id,
    wallet,
    entrypoint: env.token,
    input: '0xdeadbeef',
    gasLimit: 100_000n,
    gasEstimated: 50_000n,
    sponsored: false,
    sponsorId: null,
    feeToken: 'native',
    feeValue: 1n,
    feePayer: wallet,
    keyId: null,
    clientIp: null,
    bundles: [{ id, wallet, space, nonce: 0n }],
  });

const randomId = () => [...crypto.getRandomValues(new Uint8Array(32))].map((b) => b.toString(16).padStart(2, '0')).join('');

describe('relayer paging', () => {
  it("the SDK's loop over GetMetaTransactions (page = answer.page while more) visits every row once; a page size above 100 gets 100", async () => {
    const ids = Array.from({ length: 7 }, randomId);
    for (const id of ids) await insertFeePaid(id, newSigner().address, 78n);
    const key = { 'X-Access-Key': env.accessKey };
    const seen: string[] = [];
    let page: proto.Page = { page: 0, pageSize: 3 } as proto.Page;
    for (let calls = 0; ; calls++) {
      expect(calls, 'the loop never ends').toBeLessThan(50);
      const r = await relayer.getMetaTransactions({ projectId: env.project.id, page }, key);
      seen.push(...r.transactions.map((t) => t.metaTxnID!));
      if (!r.page.more) break;
      page = r.page;
    }
    expect(new Set(seen).size).toBe(seen.length);
    expect(seen).toEqual(expect.arrayContaining(ids));
    const all = await relayer.getMetaTransactions({ projectId: env.project.id, page: { pageSize: 100 } as proto.Page }, key);
    expect([...seen].sort()).toEqual(all.transactions.map((t) => t.metaTxnID!).sort());
    const oversized = await relayer.getMetaTransactions({ projectId: env.project.id, page: { pageSize: 5000 } as proto.Page }, key);
    expect(oversized.page).toMatchObject({ page: 1, pageSize: 100, more: false });
    // Go's zero Page (the relayer's Page has no omitempty): pageSize 0 is the default page, not a refusal.
    const goZero = await env.call('GetMetaTransactions', { projectId: env.project.id, page: { pageSize: 0, page: 0, more: false, column: '', sort: null } }, key);
    expect(goZero.status, JSON.stringify(goZero.body)).toBe(200);
    expect(goZero.body.page).toMatchObject({ page: 1, pageSize: 20 });
  });
});

describe('relayer methods refused with why', () => {
  it('RepairSender, ResetSender, UpdateMetaTxnGasLimits and GetMetaTxnNetworkFeeOptions answer MethodNotFound saying why and what to use', async () => {
    const repair = await refusal(relayer.repairSender({ sender: 0, nonce: 1, operation: proto.RepairOperation.SKIP }, admin()));
    expect(repair).toMatchObject({ name: 'MethodNotFound', status: 404 });
    expect(repair.cause).toMatch(/repairs its senders itself.*StopSender/);
    const reset = await env.call('ResetSender', { sender: 0 }, admin());
    expect(reset.body).toMatchObject({ error: 'MethodNotFound' });
    expect(reset.body.cause).toMatch(/never deleted/);
    // Admin methods still need the admin token, refused or not.
    expect((await env.call('RepairSender', { sender: 0, nonce: 1, operation: 'DROP' })).status).toBe(401);
    const limits = await refusal(relayer.updateMetaTxnGasLimits({ walletAddress: newSigner().address, walletConfig: {}, payload: '0x' }));
    expect(limits.cause).toMatch(/sizes the gas limit it signs/);
    const network = await refusal(relayer.getMetaTxnNetworkFeeOptions({ walletConfig: {}, payload: '0x' }));
    expect(network.cause).toMatch(/ask FeeOptions/);
  });

  it('the ecosystem gas-sponsor methods work through the official client (relayer-ecosystems.test.ts tests what they sponsor)', async () => {
    const eco = await env.services.ecosystems.create(`dropin-${Math.random().toString(36).slice(2, 8)}`);
    const added = await relayer.addEcosystemGasSponsor({ ecosystemId: eco.id, address: env.token, name: 'all games' }, admin());
    expect(added.gasSponsor).toMatchObject({ ecosystemId: eco.id, projectId: 0, address: env.token.toLowerCase(), name: 'all games', active: true });
    const listed = await relayer.listEcosystemGasSponsors({ ecosystemId: eco.id }, admin());
    expect(listed.gasSponsors.map((g) => g.id)).toEqual([added.gasSponsor.id]);
    expect((await relayer.updateEcosystemGasSponsor({ ecosystemId: eco.id, id: added.gasSponsor.id, active: false }, admin())).gasSponsor.active).toBe(false);
    expect((await relayer.getEcosystemGasSponsor({ ecosystemId: eco.id, id: added.gasSponsor.id }, admin())).gasSponsor.active).toBe(false);
    expect((await relayer.removeEcosystemGasSponsor({ ecosystemId: eco.id, id: added.gasSponsor.id }, admin())).status).toBe(true);
    const gone = await refusal(relayer.getEcosystemGasSponsor({ ecosystemId: eco.id, id: added.gasSponsor.id }, admin()));
    expect(gone).toMatchObject({ name: 'NotFound', status: 404 });
  });

  it('the indexer webhook listeners are served (test/indexer-webhook-listeners.test.ts)', async () => {
    // Listeners are the project's backend's: written with a secret key, sent as Sequence's client sends its secret credential.
    const secret = (await env.services.accessKeys.create(env.project.id, 'backend', { kind: 'secret' })).key;
    const indexer = new SequenceIndexer(`${env.baseUrl}/indexer/${env.chain.chainConfig.name}`, env.accessKey, secret);
    const added = await indexer.addWebhookListener({ url: 'http://127.0.0.1:1/hook', filters: { contractAddresses: [env.token] } });
    expect(added.listener).toMatchObject({ url: 'http://127.0.0.1:1/hook', active: true, filters: { contractAddresses: [env.token.toLowerCase()] } });
    expect((await indexer.removeWebhookListener({ id: added.listener.id })).status).toBe(true);
  });

  it('FeeOptions with a Sequence v3 payload (what @0xsequence/relayer 3.x sends) answers an error naming it, not a bare "not an execute call"', async () => {
    const w = newSigner().address;
    // Payload.encode of @0xsequence/wallet-primitives 3.0.9 (the 3.x relayer client's feeOptions data):
    // space 0, nonce 0, an ERC20 transfer and a value call with a gas limit.
    const packed =
      '0x030002441111111111111111111111111111111111111111000044a9059cbb000000000000000000000000222222222222222222222222222222222222222200000000000000000000000000000000000000000000000000000000000000030e333333333333333333333333333333333333333300000000000000000000000000000000000000000000000000000000000000050000000000000000000000000000000000000000000000000000000000000000005208';
    const r = await refusal(relayer.feeOptions({ wallet: w, to: w, data: packed }));
    expect(r.status).toBe(400);
    expect(r.cause).toMatch(/^input is a Sequence v3 packed calls payload \(2 calls, as @0xsequence\/relayer 3\.x sends to FeeOptions\): this relayer runs Sequence v2 wallets only/);
    expect(r.message).toMatch(/v3 wallets are not supported \(docs\/api\.md\)/);
    // A deployed v3 wallet's execute(bytes,bytes) is named too; bytes that are neither keep the plain refusal.
    expect((await refusal(relayer.feeOptions({ wallet: w, to: w, data: `0x1f6a1eb9${'00'.repeat(64)}` }))).cause).toMatch(/Sequence v3 wallet call \(execute\(bytes,bytes\)/);
    expect((await refusal(relayer.feeOptions({ wallet: w, to: w, data: '0xdeadbeef' }))).cause).toMatch(/^input is not a wallet execute/);
  });

  it('FeeOptions refuses simulate: false (every option comes from a simulation) instead of ignoring it', async () => {
    const w = newSigner().address;
    const r = await refusal(relayer.feeOptions({ wallet: w, to: w, data: '0x', simulate: false }));
    expect(r).toMatchObject({ name: 'InvalidArgument', status: 400 });
    expect(r.cause).toMatch(/simulate: false is not supported/);
  });
});

function expectReceipt(r: TransactionReceipt, hash: Hash) {
  expect(r.txnHash).toBe(hash);
  expect(r.txnStatus).toBe('SUCCESSFUL');
  expect(typeof r.blockNumber).toBe('number');
  expect(r.blockHash).toMatch(/^0x[0-9a-f]{64}$/);
  expect(Object.values(TransactionType)).toContain(r.txnType);
}
