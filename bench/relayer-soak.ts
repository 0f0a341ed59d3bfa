// Issue #19: soak. 10 000 meta-transactions from 500 wallets over 20 nonce spaces through real
// metarelay processes on PostgreSQL; judged by the chain and the stored rows, not by what the service
// says: 0 lost, 0 sent twice, every sender's ledger equal to the chain, and the processes' RSS flat.
//
//   npx tsx bench/relayer-soak.ts                                   # PostgreSQL at 127.0.0.1:5432 (BENCH_PG_URL)
//   BENCH_METATXNS=500 BENCH_WALLETS=50 npx tsx bench/relayer-soak.ts   # short check
//
// Options: BENCH_METATXNS (10000), BENCH_WALLETS (500), BENCH_CONCURRENCY (16 SendMetaTxn in flight,
// closed loop: a soak is about what stays true and what grows, and a request timed out by an open loop
// would blur "lost"), BENCH_TOPOLOGY (single: one `metarelay serve` with its dispatcher; scaled: 2 serve
// API-only + 2 relayer), BENCH_SENDERS (4), BENCH_SETTLE_S (600).
//
// Layout (20 nonce spaces): each wallet sends BENCH_METATXNS / BENCH_WALLETS sponsored ERC20 transfers.
// Even wallets use spaces 0..19, nonce 0 each (independent); odd wallets use spaces 10..19 with nonces
// 0 and 1 (each successor must wait for its predecessor). Requests go round-robin over the wallets.
//
// Checks, after every meta-transaction is final (blocks (B0, B1]: from the head before the first request
// to the head after the last receipt):
//   lost        every bundle has a row; every row SUCCEEDED; exactly one TxExecuted(_tx = its id) on chain,
//               in the block and transaction the row names; readNonce(space) of every wallet equals the
//               meta-transactions of that space; the recipient got exactly one token per meta-transaction.
//   sent twice  no id with two TxExecuted; no meta-transaction with relay transactions at two
//               (sender, nonce) slots; no two MINED relay transactions for one meta-transaction.
//   ledger      per sender: transactions on chain in the range (every block read) = its nonce delta =
//               its MINED/CONFIRMED relay_txs rows (same hashes); ETH spent by receipts (gasUsed × effective price +
//               value) = its balance delta; what the rows record as cost (meta_txns gas_used × gas_price)
//               against the receipts of the same transactions.
//   RSS         of every metarelay process every 2 s: first, last, max, least-squares slope (MB/min) over
//               the run and over its second half (after V8 has grown its heap to the working set).
import { encodeFunctionData, type Address } from 'viem';
import { rpcCall } from '../src/devchain/index.ts';
import { erc20 } from '../test/support/relayer-env.ts';
import { envNumber, machineInfo, progress, runBench } from './lib/harness.ts';
import { balancesAt, senderTransactions, txExecuted, walletNonces } from './lib/chain-truth.ts';
import type { ServerProcess } from './lib/processes.ts';
import { startCluster } from './lib/relayer-cluster.ts';
import { HeadWatch, round3 } from './lib/relayer-bench.ts';
import {
  RECIPIENT,
  anvilKey,
  benchCommand,
  callRelayer,
  closedLoop,
  intakeSummary,
  metaRows,
  newUsers,
  readyWallets,
  sampleProcesses,
  sampleQueue,
  sendBody,
  signJobs,
  waitAllFinal,
  type Job,
  type User,
} from './lib/relayer-load.ts';
import { privateKeyToAccount } from 'viem/accounts';

const TOTAL = envNumber('BENCH_METATXNS', 10_000);
const WALLETS = envNumber('BENCH_WALLETS', 500);
const CONCURRENCY = envNumber('BENCH_CONCURRENCY', 16);
const SENDERS = envNumber('BENCH_SENDERS', 4);
const SETTLE_MS = envNumber('BENCH_SETTLE_S', 600) * 1000;
const TOPOLOGY = (process.env.BENCH_TOPOLOGY ?? 'single') as 'single' | 'scaled';
if (TOPOLOGY !== 'single' && TOPOLOGY !== 'scaled') throw new Error(`BENCH_TOPOLOGY must be single or scaled, got "${TOPOLOGY}"`);
const SPACES = 20;

/** The (space, nonce) slots of wallet w, in sending order. */
function slotsOf(w: number, count: number): Array<{ space: bigint; n: bigint }> {
  if (w % 2 === 0) return Array.from({ length: count }, (_, j) => ({ space: BigInt(j % SPACES), n: BigInt(Math.floor(j / SPACES)) }));
  // Odd wallets: spaces 10..19, two sequential nonces each (predecessor first).
  return Array.from({ length: count }, (_, j) => ({ space: BigInt(SPACES / 2 + (Math.floor(j / 2) % (SPACES / 2))), n: BigInt(j % 2) + 2n * BigInt(Math.floor(j / SPACES)) }));
}

runBench(async (cleanup) => {
  const loadavgAtStart = machineInfo().loadavg1m;
  const cluster = await startCluster(cleanup, { senders: SENDERS });
  const { rpcUrl, chainId } = cluster;
  progress(`anvil ${rpcUrl}, database ${cluster.bdb.location}, topology ${TOPOLOGY}`);
  const users = newUsers(WALLETS);
  await readyWallets(rpcUrl, chainId, cluster.token, users);
  const perWallet = Math.ceil(TOTAL / WALLETS);
  const plan: Array<{ user: User; space: bigint; n: bigint }> = [];
  const slots = users.map((_, w) => slotsOf(w, perWallet));
  for (let j = 0; j < perWallet; j++) for (let w = 0; w < WALLETS && plan.length < TOTAL; w++) plan.push({ user: users[w], ...slots[w][j] });
  const t0 = Date.now();
  const jobs = await signJobs(chainId, cluster.token, plan);
  progress(`${jobs.length} bundles signed in ${Date.now() - t0} ms`);

  await rpcCall(rpcUrl, 'evm_setAutomine', [false]);
  await rpcCall(rpcUrl, 'evm_setIntervalMining', [1]);
  const heads = new HeadWatch(rpcUrl);
  await heads.ready();
  cleanup.add('head watch', () => heads.stop());

  const procs: Record<string, ServerProcess> = {};
  const apis: Array<ServerProcess & { relayerUrl: string }> = [];
  if (TOPOLOGY === 'single') apis.push((procs.serve = await cluster.serve('serve', true)));
  else {
    apis.push((procs['serve-1'] = await cluster.serve('serve-1', false)));
    apis.push((procs['serve-2'] = await cluster.serve('serve-2', false)));
    procs['relayer-1'] = await cluster.relayer('relayer-1');
    procs['relayer-2'] = await cluster.relayer('relayer-2');
  }
  await cluster.sponsorToken(apis[0].relayerUrl);
  const senders = Array.from({ length: SENDERS }, (_, i) => privateKeyToAccount(anvilKey(i + 1)).address.toLowerCase());

  // B0: nothing of ours is in flight yet (no warm-up: the soak starts cold, as a fresh deployment does).
  const b0 = heads.head;
  const before = await balancesAt(rpcUrl, [...senders, RECIPIENT], b0);
  const tokenBefore = await rpcCall<string>(rpcUrl, 'eth_call', [
    { to: cluster.token, data: encodeFunctionData({ abi: erc20, functionName: 'balanceOf', args: [RECIPIENT] }) },
    `0x${b0.toString(16)}`,
  ]);

  const rss = sampleProcesses(Object.fromEntries(Object.entries(procs).map(([k, p]) => [k, p.pid])), 2_000);
  const queue = sampleQueue(cluster.bdb.db, chainId, 2_000);
  const send = (job: Job, t: number) => callRelayer(apis[t].relayerUrl, cluster.accessKey, 'SendMetaTxn', sendBody(job));
  progress(`soak: ${jobs.length} meta-transactions, ${CONCURRENCY} in flight over ${apis.length} API process(es)`);
  let lastLog = Date.now();
  let done = 0;
  const ran = await closedLoop(jobs, CONCURRENCY, apis.length, heads, async (job, t) => {
    const a = await send(job, t);
    if (++done && Date.now() - lastLog > 10_000) {
      lastLog = Date.now();
      progress(`soak: ${done}/${jobs.length} answered`);
    }
    return a;
  });
  const intake = intakeSummary(ran.samples);
  progress(`soak: ${intake.accepted}/${jobs.length} accepted, ${intake.acceptedPerSec}/s`);
  const allIds = jobs.map((j) => j.bundle.id.slice(2).toLowerCase());
  const settled = await waitAllFinal(cluster.bdb.db, chainId, allIds, 'soak settle', SETTLE_MS);
  // A few more blocks so every receipt the rows name is below B1 and the senders are idle.
  await heads.waitFor(heads.head + 3, 30_000);
  const rssStats = rss.stop();
  const backlog = await queue.stop();
  const b1 = heads.head;
  progress(`checking blocks ${b0 + 1}..${b1} against the rows`);

  // ---- lost / sent twice
  const rows = await metaRows(cluster.bdb.db, chainId, allIds);
  const executed = await txExecuted(rpcUrl, chainId, b0, b1);
  const execById = new Map<string, typeof executed>();
  for (const e of executed) execById.set(e.tx, [...(execById.get(e.tx) ?? []), e]);
  const walletSet = new Set(users.map((u) => u.wallet.address.toLowerCase()));
  const problems: Record<string, unknown[]> = { noRow: [], notSucceeded: [], noExecution: [], executedTwice: [], executionElsewhere: [], executedButNotSucceeded: [], strangerExecution: [] };
  const note = (k: string, v: unknown) => problems[k].push(v);
  for (const job of jobs) {
    const id = job.bundle.id.slice(2).toLowerCase();
    const row = rows.get(id);
    const ex = execById.get(id) ?? [];
    if (!row) note('noRow', id);
    else if (row.status !== 'SUCCEEDED') note('notSucceeded', { id, status: row.status, reason: row.revert_reason });
    if (ex.length > 1) note('executedTwice', { id, at: ex });
    if (row?.status === 'SUCCEEDED' && ex.length === 0) note('noExecution', id);
    if (row && row.status !== 'SUCCEEDED' && ex.length) note('executedButNotSucceeded', { id, status: row.status });
    if (row && ex.length === 1 && (ex[0].txHash !== row.txn_hash?.toLowerCase() || ex[0].block !== row.block_number || ex[0].wallet !== job.user.wallet.address.toLowerCase()))
      note('executionElsewhere', { id, row: { hash: row.txn_hash, block: row.block_number }, chain: ex[0] });
  }
  const ids = new Set(allIds);
  for (const e of executed) if (walletSet.has(e.wallet) && !ids.has(e.tx)) note('strangerExecution', e);

  const slotRows = await cluster.bdb.db.query<{ meta_txn_id: string; slots: string; mined: string }>(
    `SELECT meta_txn_id, count(DISTINCT (sender, nonce))::text AS slots, count(*) FILTER (WHERE status IN ('MINED', 'CONFIRMED'))::text AS mined
       FROM relay_txs WHERE chain_id = $1 AND meta_txn_id IS NOT NULL GROUP BY meta_txn_id`,
    [chainId],
  );
  const twoSlots = slotRows.rows.filter((r) => Number(r.slots) > 1 || Number(r.mined) > 1);

  // Wallet nonces: per (wallet, space), the meta-transactions of that space.
  const expected = new Map<string, { wallet: Address; space: bigint; n: bigint }>();
  for (const j of jobs) {
    const k = `${j.user.wallet.address}:${j.space}`;
    const cur = expected.get(k);
    expected.set(k, { wallet: j.user.wallet.address, space: j.space, n: (cur?.n ?? 0n) + 1n });
  }
  const pairs = [...expected.values()];
  const nonces = await walletNonces(rpcUrl, pairs);
  const nonceMismatch = pairs.flatMap((p, i) => (nonces[i] !== p.n ? [{ wallet: p.wallet, space: p.space.toString(), expected: p.n.toString(), chain: nonces[i].toString() }] : []));
  const tokenAfter = await rpcCall<string>(rpcUrl, 'eth_call', [{ to: cluster.token, data: encodeFunctionData({ abi: erc20, functionName: 'balanceOf', args: [RECIPIENT] }) }, `0x${b1.toString(16)}`]);
  const received = BigInt(tokenAfter) - BigInt(tokenBefore);

  // ---- sender ledgers
  const after = await balancesAt(rpcUrl, senders, b1);
  const onChain = await senderTransactions(rpcUrl, senders, b0, b1);
  const relayTxs = await cluster.bdb.db.query<{ sender: string; hash: string; nonce: string; meta_txn_id: string | null }>(
    `SELECT sender, hash, nonce::text AS nonce, meta_txn_id FROM relay_txs WHERE chain_id = $1 AND status IN ('MINED', 'CONFIRMED')`,
    [chainId],
  );
  const costRows = await cluster.bdb.db.query<{ sender: string; cost: string; n: string }>(
    `SELECT lower(sender) AS sender, sum(gas_used::numeric * gas_price)::text AS cost, count(*)::text AS n FROM meta_txns
      WHERE chain_id = $1 AND status = 'SUCCEEDED' GROUP BY lower(sender)`,
    [chainId],
  );
  const ledgers = senders.map((s) => {
    const chainTxs = onChain.get(s)!;
    const stored = relayTxs.rows.filter((r) => r.sender.toLowerCase() === s);
    const storedHashes = new Set(stored.map((r) => r.hash.toLowerCase()));
    const missingInRows = [...chainTxs.hashes].filter((h) => !storedHashes.has(h));
    const missingOnChain = [...storedHashes].filter((h) => !chainTxs.hashes.has(h));
    const nonceDelta = after.get(s)!.nonce - before.get(s)!.nonce;
    const balanceDelta = before.get(s)!.wei - after.get(s)!.wei;
    const recorded = costRows.rows.find((r) => r.sender === s);
    const fills = stored.filter((r) => r.meta_txn_id == null).length;
    return {
      sender: s,
      chainTxs: chainTxs.txs,
      nonceDelta,
      minedRelayTxRows: stored.length,
      fillRows: fills,
      missingInRows: missingInRows.length,
      missingOnChain: missingOnChain.length,
      revertedOnChain: chainTxs.reverted,
      spentByReceiptsWei: chainTxs.spentWei.toString(),
      balanceDeltaWei: balanceDelta.toString(),
      recordedCostWei: recorded?.cost ?? '0',
      recordedMetaTxns: Number(recorded?.n ?? 0),
      ok: chainTxs.txs === nonceDelta && stored.length === chainTxs.txs && missingInRows.length === 0 && missingOnChain.length === 0 && chainTxs.spentWei === balanceDelta,
    };
  });

  const counts = Object.fromEntries(Object.entries(problems).map(([k, v]) => [k, v.length]));
  const lost = counts.noRow + counts.notSucceeded + counts.noExecution;
  const sentTwice = counts.executedTwice + twoSlots.length;
  return {
    bench: 'relayer-soak',
    issue: 19,
    db: 'postgres',
    command: benchCommand(),
    topology: TOPOLOGY,
    metaTxns: jobs.length,
    wallets: WALLETS,
    nonceSpaces: SPACES,
    senders: SENDERS,
    concurrency: CONCURRENCY,
    blocks: { from: b0 + 1, to: b1 },
    machine: { ...machineInfo(), loadavgAtStart },
    summary: {
      lost,
      sentTwice,
      ledgersEqualChain: ledgers.every((l) => l.ok),
      walletNoncesEqualChain: nonceMismatch.length === 0,
      recipientReceived: `${received}/${jobs.length}`,
      accepted: `${intake.accepted}/${jobs.length}`,
      acceptedPerSec: intake.acceptedPerSec,
      soakMs: settled.settleMs + intake.wallMs,
      rssMb: Object.fromEntries(Object.entries(rssStats.perProcess).map(([k, v]) => [k, (v as { rssMb: unknown }).rssMb])),
      maxQueued: backlog.maxQueued,
    },
    intake,
    settle: settled,
    problems: { counts, examples: Object.fromEntries(Object.entries(problems).map(([k, v]) => [k, v.slice(0, 5)])), twoSlots: twoSlots.slice(0, 5), nonceMismatch: nonceMismatch.slice(0, 5) },
    walletNonces: { pairs: pairs.length, mismatches: nonceMismatch.length },
    txExecutedEvents: executed.length,
    ledgers,
    processes: rssStats,
    rssSeries: rss.series.map((s) => ({ t: s.t, rssMb: s.rssMb })),
    queueDepth: { maxQueued: backlog.maxQueued, maxSent: backlog.maxSent, series: backlog.series },
    cpuSecondsPerProcess: Object.fromEntries(Object.entries(rssStats.perProcess).map(([k, v]) => [k, (v as { cpuS: number }).cpuS])),
    cpuMsPerMetaTxn: round3((Object.values(rssStats.perProcess as Record<string, { cpuS: number }>).reduce((a, v) => a + v.cpuS, 0) * 1000) / jobs.length),
  };
});
