// Issue #18 (EIP-7702): what relaying a delegated EOA costs next to a Sequence v2 wallet, per bundle:
// node calls made by SendMetaTxn intake (by method), CPU of this process per intake request, and gas
// used on chain by the relayed transaction. Same run, same bundle (one sponsored ERC20 mint), three kinds:
//
//   v2        a deployed Sequence v2 wallet (the anchor: what intake and dispatch already cost)
//   7702-first  an EOA's first bundle, with its authorization (intake checks it; type-4 transaction)
//   7702-next   the same EOAs' next bundle, no authorization (recognised by the delegation designator)
//
// Plus the relayer's `Ping` (CPU per request) as the bare anchor. Intake is measured with the dispatcher
// stopped, requests one at a time, and node calls counted at a JSON-RPC proxy between metarelay and anvil
// (anvil started with --hardfork prague, automine); the dispatcher then relays them all.
//
//   METARELAY_TEST_DB=pglite npx tsx bench/relayer-7702.ts        (BENCH_N: bundles per kind, default 20)
//
// Result JSON on stdout; progress on stderr.
import { commons } from '@0xsequence/core';
import { encodeFunctionData, type Address, type Hex } from 'viem';
import { generatePrivateKey, privateKeyToAccount, sign, signAuthorization } from 'viem/accounts';
import { deployDelegatedWallet } from '../src/devchain/index.ts';
import { erc20, sponsor, startRelayerEnv, type RelayerEnv } from '../test/support/relayer-env.ts';
import { deployWallets, mintBundles, allFinal } from '../test/support/relay-load.ts';
import { startTokenChain } from '../test/support/token-chain.ts';
import { provideTestDbContext, round3 } from './lib/relayer-bench.ts';
import { envNumber, machineInfo, progress, runBench } from './lib/harness.ts';

const N = envNumber('BENCH_N', 20);

interface Item {
  wallet: Address;
  contract: Address;
  input: Hex;
  authorization?: unknown;
}

async function eoaBundle(env: RelayerEnv, privateKey: Hex, nonce: bigint): Promise<Item> {
  const address = privateKeyToAccount(privateKey).address;
  const transactions = [{ to: env.token, value: 0n, data: encodeFunctionData({ abi: erc20, functionName: 'mint', args: [address, 1n] }), gasLimit: 0n, delegateCall: false, revertOnError: true }];
  const subdigest = commons.transaction.subdigestOfTransactions(address, env.chainId, nonce, transactions) as Hex;
  const signature = await sign({ hash: subdigest, privateKey, to: 'hex' });
  const input = commons.transaction.encodeBundleExecData({
    entrypoint: address,
    transactions,
    nonce,
    signature,
    chainId: BigInt(env.chainId),
    intent: { id: subdigest, wallet: address },
  } as never) as Hex;
  return { wallet: address, contract: address, input };
}

async function measure(env: RelayerEnv, what: string, items: Item[]) {
  const proxy = env.proxy!;
  const dispatcher = env.services.dispatchers[0];
  await dispatcher.stop();
  proxy.calls.length = 0;
  const cpu = process.cpuUsage();
  const started = performance.now();
  const ids: string[] = [];
  for (const it of items) {
    const r = await env.call('SendMetaTxn', { call: { walletAddress: it.wallet, contract: it.contract, input: it.input, authorization: it.authorization } }, { 'x-access-key': env.accessKey });
    if (r.status !== 200) throw new Error(`${what}: ${JSON.stringify(r.body)}`);
    ids.push(r.body.txnHash);
  }
  const used = process.cpuUsage(cpu);
  const wallMs = performance.now() - started;
  const intakeCalls = proxy.calls.length;
  const byMethod: Record<string, number> = {};
  for (const c of proxy.calls) byMethod[c.method] = (byMethod[c.method] ?? 0) + 1;
  dispatcher.start();
  const statuses = await allFinal(env, ids, 180_000);
  const rows = await env.services.db.query<{ gas_used: string; txn_hash: string }>('SELECT gas_used::text AS gas_used, txn_hash FROM meta_txns WHERE chain_id = $1 AND id = ANY($2)', [
    env.chainId,
    ids.map((id) => id.replace(/^0x/, '')),
  ]);
  const gas = rows.rows.map((r) => Number(r.gas_used)).sort((a, b) => a - b);
  const types = new Set(await Promise.all(rows.rows.slice(0, 3).map(async (r) => (await env.public.getTransaction({ hash: r.txn_hash as Hex })).type)));
  return {
    kind: what,
    n: items.length,
    succeeded: [...statuses.values()].filter((s) => s === 'SUCCEEDED').length,
    intakeNodeCallsPerRequest: round3(intakeCalls / items.length),
    intakeNodeCallsByMethodPerRequest: Object.fromEntries(Object.entries(byMethod).map(([m, c]) => [m, round3(c / items.length)])),
    intakeCpuMsPerRequest: round3((used.user + used.system) / 1000 / items.length),
    intakeWallMsPerRequest: round3(wallMs / items.length),
    gasUsedMedian: gas[Math.floor(gas.length / 2)],
    txTypes: [...types],
  };
}

async function pingCpu(env: RelayerEnv, n: number) {
  const cpu = process.cpuUsage();
  for (let i = 0; i < n; i++) await env.call('Ping', {}, { 'x-access-key': env.accessKey });
  const used = process.cpuUsage(cpu);
  return round3((used.user + used.system) / 1000 / n);
}

runBench(async (cleanup) => {
  const loadavgAtStart = machineInfo().loadavg1m;
  await provideTestDbContext(cleanup);
  const chain = await startTokenChain({ anvilArgs: ['--hardfork', 'prague'] });
  cleanup.add('anvil', () => chain.stop());
  const impl = await deployDelegatedWallet(chain.anvil.rpcUrl, chain.artifacts);
  const env = await startRelayerEnv({ chain, proxy: true, relayer: { delegatedWallets: [impl], maxQueuedPerAddress: 100_000 } });
  cleanup.add('relayer env', () => env.close());
  await sponsor(env, 'CONTRACT', env.token);
  progress(`relayer ${env.relayerUrl}, anvil ${env.rpcUrl} (prague), ${N} bundles per kind`);

  // Warm-up: one of each path, not counted.
  const warmKey = generatePrivateKey();
  const warm = await eoaBundle(env, warmKey, 0n);
  warm.authorization = { chainId: env.chainId, implementation: impl, nonce: 0, signature: await signAuthorization({ address: impl, chainId: env.chainId, nonce: 0, privateKey: warmKey, to: 'hex' }) };
  await measure(env, 'warm-up', [warm]);

  const users = await deployWallets(env, N);
  const v2 = (await mintBundles(env, users, 1)).map((x) => ({ wallet: x.user.wallet.address, contract: x.bundle.entrypoint as Address, input: x.bundle.input as Hex }));
  const keys = Array.from({ length: N }, () => generatePrivateKey());
  const first = await Promise.all(
    keys.map(async (k) => {
      const item = await eoaBundle(env, k, 0n);
      item.authorization = { chainId: env.chainId, implementation: impl, nonce: 0, signature: await signAuthorization({ address: impl, chainId: env.chainId, nonce: 0, privateKey: k, to: 'hex' }) };
      return item;
    }),
  );
  const next = await Promise.all(keys.map((k) => eoaBundle(env, k, 1n)));

  const results = [];
  results.push(await measure(env, 'v2', v2));
  results.push(await measure(env, '7702-first', first));
  results.push(await measure(env, '7702-next', next));
  const ping = await pingCpu(env, 200);
  return { bench: 'relayer-7702', db: process.env.METARELAY_TEST_DB ?? 'pglite', loadavgAtStart, loadavgAtEnd: machineInfo().loadavg1m, pingCpuMsPerRequest: ping, results };
});
