// A real anvil with the test token contracts, shared by the token metadata end-to-end tests.
// Transactions are signed with explicit nonces and sent at once; receipts are awaited together.

import http from 'node:http';
import type { AddressInfo } from 'node:net';
import path from 'node:path';
import { encodeDeployData, encodeFunctionData, getContractAddress, keccak256, type Address, type Hash, type Hex } from 'viem';
import { privateKeyToAccount } from 'viem/accounts';
import { ANVIL_DEPLOYER_KEY, REPO_ROOT, compileContracts, devPublicClient, devWalletClient, installMulticall3, startAnvil, type AnvilHandle, type Artifacts } from '../../src/devchain/index.ts';
import type { FastifyInstance } from 'fastify';
import { parseConfig } from '../../src/config/load.ts';
import type { AppConfigInput } from '../../src/config/schema.ts';
import { buildApp } from '../../src/cli/app.ts';
import { createServices, type Services } from '../../src/services.ts';
import { createLogger } from '../../src/telemetry/logger.ts';
import { rpc, type TestService } from './service.ts';

const CACHE_DIR = path.join(REPO_ROOT, 'node_modules/.cache/metarelay/solc');

// Automine puts each transaction in its own block, so a generous fixed limit costs nothing and
// saves an estimateGas round trip per call (data: URIs make setTokenURI storage-heavy).
const CALL_GAS = 3_000_000n;

export interface ContractCall {
  address: Address;
  contract: string;
  functionName: string;
  args: unknown[];
}

export interface TokenChain {
  anvil: AnvilHandle;
  artifacts: Artifacts;
  /** The `chains` entry of a service config for this anvil (network name "anvil"). */
  chainConfig: { chainId: number; name: string; rpcUrls: string[] };
  /** Deploys every contract in one go; addresses in the order given. */
  deploy(items: Array<{ contract: string; args?: unknown[] }>): Promise<Address[]>;
  /** Sends every call in one go and waits for all of them; throws if any reverted. */
  send(calls: ContractCall[]): Promise<void>;
  /** Reads the sender's nonce from the node again (after evm_revert took the chain back). */
  resyncNonce(): Promise<void>;
  stop(): Promise<void>;
}

/** `anvilArgs`: extra anvil flags (e.g. `--hardfork prague` for EIP-7702); `chainId`: a second chain beside the first (default 31337). */
export async function startTokenChain(opts: { anvilArgs?: string[]; chainId?: number } = {}): Promise<TokenChain> {
  const [anvil, artifacts] = await Promise.all([startAnvil({ blockTime: null, args: opts.anvilArgs, chainId: opts.chainId }), compileContracts({ cacheDir: CACHE_DIR })]);
  try {
    await installMulticall3(anvil.rpcUrl, artifacts.Multicall3!.deployedBytecode);
  } catch (err) {
    await anvil.stop();
    throw err;
  }
  const account = privateKeyToAccount(ANVIL_DEPLOYER_KEY);
  const pub = devPublicClient(anvil.rpcUrl, anvil.chainId);
  const wallet = devWalletClient(anvil.rpcUrl, anvil.chainId, account);
  const fees = await pub.estimateFeesPerGas();
  const feeFields = { maxFeePerGas: fees.maxFeePerGas * 2n, maxPriorityFeePerGas: fees.maxPriorityFeePerGas };
  let nonce = await pub.getTransactionCount({ address: account.address, blockTag: 'pending' });
  // Nonces are handed out in send order; one sender at a time keeps them gap-free.
  let queue: Promise<unknown> = Promise.resolve();
  const serial = <T>(fn: () => Promise<T>): Promise<T> => {
    const p = queue.then(fn);
    queue = p.catch(() => undefined);
    return p;
  };

  const artifact = (name: string) => {
    const a = artifacts[name];
    if (!a) throw new Error(`artifact ${name} missing`);
    return a;
  };

  // Every transaction signed here, by nonce, until the account's mined nonce is past it: what a nudge
  // sends again (a receipt seen is not enough: see nudgeIfStalled).
  const signed = new Map<number, Hex>();
  /** The account's mined nonce as last read, and when it last moved: a nudge waits for our transactions to stall. */
  const watch = { mined: -1, movedAt: Date.now(), checkedAt: 0 };
  /** What the last nudge did, for the error of a receipt that never came (how anvil answered the lowest nonce sent again). */
  const lastNudge = { at: 0, count: 0, mined: -1, lowest: '' };
  let nudging: Promise<void> | undefined;

  /** Signs here and sends the raw transaction, so it can be sent again if anvil loses it. */
  async function sendSigned(tx: { to?: Address; data: Hex; gas: bigint; nonce: number }): Promise<Hash> {
    const raw = await wallet.signTransaction({ ...tx, ...feeFields, account, chain: wallet.chain });
    signed.set(tx.nonce, raw);
    return (await pub.request({ method: 'eth_sendRawTransaction', params: [raw] })) as Hash;
  }

  /**
   * Anvil's automine can leave a ready transaction in its pool (foundry-rs/foundry#10122), and was seen
   * under load to lose 19 and 90 in a row (a receipt awaited for nonce 206 with the account at 116 and
   * nothing pending). When our mined nonce has not moved for 2 s while receipts are awaited, every transaction
   * of ours at or above the account's mined nonce is sent again in nonce order (the node ignores what it
   * holds) and one block is mined by hand. Once per stall for all waiters, never while ours are mined:
   * a nudge per waiter every 2 s (250 waiters for a batch of mints) mined beside a busy automine, and is
   * the likely way those transactions were lost.
   */
  function nudgeIfStalled(): Promise<void> | undefined {
    const now = Date.now();
    if (nudging || now - watch.checkedAt < 500) return nudging;
    watch.checkedAt = now;
    nudging = (async () => {
      // Our mined nonce, not the head: with interval mining (or others' transactions) blocks keep coming
      // while ours are lost (the account stuck at 516 for 60 s, 532 waiting in the pool, under a CPU hog).
      const mined = await pub.getTransactionCount({ address: account.address, blockTag: 'latest' }).catch(() => undefined);
      if (mined === undefined) return;
      if (mined !== watch.mined) {
        watch.mined = mined;
        watch.movedAt = Date.now();
        return;
      }
      if (Date.now() - watch.movedAt < 2_000) return;
      // Nudged at this mined nonce before, and the re-sends changed nothing: anvil may hold ours in its
      // pool without mining them (foundry-rs/foundry#10122), answering a re-send "already known", or
      // priced under a base fee that full blocks raised (src/devchain/sequence.ts met that). Each is
      // dropped from the pool first, so the re-send puts it back as new, and the next block's base fee is 0.
      const again = lastNudge.mined === mined;
      if (again) await pub.request({ method: 'anvil_setNextBlockBaseFeePerGas' as never, params: ['0x0'] as never }).catch(() => undefined);
      lastNudge.at = Date.now();
      lastNudge.count++;
      lastNudge.mined = mined;
      lastNudge.lowest = `nonce ${mined} not signed here`;
      for (const [nonce, raw] of [...signed].sort((a, b) => a[0] - b[0])) {
        if (nonce < mined) signed.delete(nonce);
        else {
          if (again) await pub.request({ method: 'anvil_dropTransaction' as never, params: [keccak256(raw)] as never }).catch(() => undefined);
          const answer = await pub.request({ method: 'eth_sendRawTransaction', params: [raw] }).then(
            (h) => `accepted ${String(h).slice(0, 10)}`,
            (err: Error) => `refused: ${err.message.split('\n')[0]?.slice(0, 160)}`,
          );
          if (nonce === mined) lastNudge.lowest = `nonce ${nonce} ${answer}`;
        }
      }
      await pub.request({ method: 'evm_mine' as never, params: [] as never }).catch(() => undefined);
      watch.movedAt = Date.now();
    })().finally(() => {
      nudging = undefined;
    });
    return nudging;
  }

  async function receiptOf(hash: Hash) {
    const start = Date.now();
    for (;;) {
      const r = await pub.getTransactionReceipt({ hash }).catch(() => null);
      if (r) return r;
      await nudgeIfStalled();
      if (Date.now() - start > 60_000) {
        const tx = await pub.getTransaction({ hash }).catch(() => null);
        const counts = await Promise.all((['latest', 'pending'] as const).map((blockTag) => pub.getTransactionCount({ address: account.address, blockTag }).catch(() => -1)));
        const nudged = lastNudge.count ? `${lastNudge.count} nudges, the last ${Date.now() - lastNudge.at} ms ago: ${lastNudge.lowest}` : 'never nudged';
        throw new Error(`no receipt for ${hash} after 60 s (known to the node: ${tx ? `yes, nonce ${tx.nonce}` : 'no'}; account nonce latest/pending ${counts.join('/')}; ${nudged})`);
      }
      await new Promise((res) => setTimeout(res, 50));
    }
  }

  async function waitAll(sent: Array<{ what: string; hash: Hash }>) {
    // Asks for the receipts directly: viem's waitForTransactionReceipt watches for new blocks and was seen
    // to miss a transaction mined before its watcher started (automine, loaded machine).
    const receipts = await Promise.all(sent.map(({ hash }) => receiptOf(hash)));
    const failed = receipts.flatMap((r, i) => (r.status === 'success' ? [] : [sent[i]!.what]));
    if (failed.length) throw new Error(`transactions reverted: ${failed.join('; ')}`);
  }

  return {
    anvil,
    artifacts,
    chainConfig: { chainId: anvil.chainId, name: 'anvil', rpcUrls: [anvil.rpcUrl] },
    async deploy(items) {
      const data = items.map((it) => {
        const a = artifact(it.contract);
        return encodeDeployData({ abi: a.abi, bytecode: a.bytecode, args: it.args ?? [] });
      });
      // One estimate per distinct contract: the args only change string lengths, covered by the margin.
      const gasByContract = new Map<string, bigint>();
      for (const [i, it] of items.entries()) {
        if (!gasByContract.has(it.contract)) {
          gasByContract.set(it.contract, ((await pub.estimateGas({ account, data: data[i]! })) * 3n) / 2n + 100_000n);
        }
      }
      return serial(async () => {
        const sent: Array<{ what: string; hash: Hash }> = [];
        const addresses: Address[] = [];
        for (const [i, it] of items.entries()) {
          addresses.push(getContractAddress({ from: account.address, nonce: BigInt(nonce) }));
          const hash = await sendSigned({ data: data[i]!, gas: gasByContract.get(it.contract)!, nonce: nonce++ });
          sent.push({ what: `deploy ${it.contract}`, hash });
        }
        await waitAll(sent);
        return addresses;
      });
    },
    async send(calls) {
      await serial(async () => {
        const sent: Array<{ what: string; hash: Hash }> = [];
        for (const c of calls) {
          const input: Hex = encodeFunctionData({ abi: artifact(c.contract).abi, functionName: c.functionName, args: c.args });
          const hash = await sendSigned({ to: c.address, data: input, gas: CALL_GAS, nonce: nonce++ });
          sent.push({ what: `${c.contract}.${c.functionName}`, hash });
        }
        await waitAll(sent);
      });
    },
    async resyncNonce() {
      await serial(async () => {
        nonce = await pub.getTransactionCount({ address: account.address, blockTag: 'pending' });
        // What the revert took back is not to be sent again.
        signed.clear();
      });
    },
    stop: () => anvil.stop(),
  };
}

export type Handler = (req: http.IncomingMessage, res: http.ServerResponse, url: URL) => void;

/** A bare local HTTP server, for what the dev origin cannot do (redirects, endless streams). */
export interface RawServer {
  url: string;
  port: number;
  requestCount(pathname?: string): number;
  stop(): Promise<void>;
}

export async function startRawServer(handler: Handler): Promise<RawServer> {
  const counts = new Map<string, number>();
  let total = 0;
  const server = http.createServer((req, res) => {
    const url = new URL(req.url ?? '/', 'http://raw');
    total++;
    counts.set(url.pathname, (counts.get(url.pathname) ?? 0) + 1);
    handler(req, res, url);
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const { port } = server.address() as AddressInfo;
  return {
    url: `http://127.0.0.1:${port}`,
    port,
    requestCount: (p) => (p === undefined ? total : (counts.get(p) ?? 0)),
    stop: () =>
      new Promise<void>((resolve) => {
        server.closeAllConnections();
        server.close(() => resolve());
      }),
  };
}

export type WireToken = {
  chainId: number;
  contractAddress: string;
  tokenId: string;
  name: string;
  description: string;
  image: string;
  image_data?: string;
  status: 'NOT_AVAILABLE' | 'REFRESHING' | 'AVAILABLE';
  queuedAt: string | null;
  updatedAt: string;
  failureReason?: string;
  failureMessage?: string;
  attributes: unknown[] | null;
  properties: Record<string, unknown> | null;
  decimals: number;
};

/** GetTokenMetadata through the RPC API, with the service's access key; asserts HTTP 200. */
/** What the helpers need of a service: TestService, or a secondProcess with the first one's key. */
export type Api = { app: FastifyInstance; accessKey: string };

export async function getTokenMetadata(t: Api, contract: string, tokenIDs: Array<string | number>): Promise<WireToken[]> {
  const res = await rpc(t.app, '/rpc/Metadata/GetTokenMetadata', { chainID: 'anvil', contractAddress: contract, tokenIDs }, { 'x-access-key': t.accessKey });
  if (res.status !== 200) throw new Error(`GetTokenMetadata answered ${res.status}: ${JSON.stringify(res.body)}`);
  return res.body.tokenMetadata as WireToken[];
}

export async function getRest(t: Pick<Api, 'app'>, url: string, headers: Record<string, string> = {}) {
  const res = await t.app.inject({ method: 'GET', url, headers });
  return { status: res.statusCode, headers: res.headers, text: res.body, body: res.body ? JSON.parse(res.body) : undefined };
}

export interface Attempt {
  url: string;
  status?: number;
  bytes: number;
  ms: number;
  error?: string;
  redirectedTo?: string;
}

export interface Explanation {
  status: string;
  tokenUri: string | null;
  fetchCount: number;
  failureReason: string | null;
  failureMessage: string | null;
  raw: unknown;
  trace: { block: string | null; standard: string; method: string; decoder?: string; idVariant?: string; error?: string; attempts: Attempt[] };
}

export async function explain(t: Pick<Api, 'app'>, contract: string, id: string | number): Promise<Explanation> {
  const res = await getRest(t, `/tokens/anvil/${contract}/${id}/explain`);
  if (res.status !== 200) throw new Error(`explain answered ${res.status}: ${res.text}`);
  return res.body as Explanation;
}

/** Polls until `check` passes or the deadline is reached (then rethrows its last failure). */
export async function eventually<T>(fn: () => Promise<T>, check: (v: T) => void, timeoutMs = 10_000): Promise<T> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const v = await fn();
    try {
      check(v);
      return v;
    } catch (err) {
      if (Date.now() > deadline) throw err;
    }
    await new Promise((r) => setTimeout(r, 100));
  }
}

export const b64 = (text: string) => Buffer.from(text, 'utf8').toString('base64');

/**
 * Another process on the same database: its own services (empty hot cache, nothing in flight),
 * the way a second `metarelay serve` shares PostgreSQL.
 */
export async function secondProcess(t: TestService, config: Partial<AppConfigInput>): Promise<{ app: FastifyInstance; services: Services; close(): Promise<void> }> {
  const cfg = parseConfig({ allowPrivateNetworks: true, logLevel: 'silent', ...config, database: t.testDb.location });
  const services = await createServices(cfg, { db: t.testDb.db, log: createLogger('silent'), pollingIntervalMs: 50, migrate: false });
  const app = await buildApp(services);
  return {
    app,
    services,
    async close() {
      await app.close();
      await services.close();
    },
  };
}
