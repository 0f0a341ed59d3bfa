import { randomBytes } from 'node:crypto';
import { hostname } from 'node:os';
import { keccak256, type Address, type Hex } from 'viem';
import { privateKeyToAccount, type PrivateKeyAccount } from 'viem/accounts';
import type { Db, Queryable } from '../store/db.ts';
import type { Logger } from '../telemetry/logger.ts';
import type { RelayEvents } from './events.ts';
import { readNonces } from './nonces.ts';
import { outcomeOf, type RawReceipt } from './receipts.ts';
import { classifySendError, errorText } from './rpc-errors.ts';
import type { ChainRelayer } from './service.ts';
import { probeTokens, tokenKey } from './fees.ts';
import { simulateExact, type NonceOverride } from './simulate.ts';
import type { MetaTxnRepo, MetaTxnRow } from './store.ts';

const LEASE_SEC = 30;
const MAX_ATTEMPTS = 5;
const BATCH = 50;

interface Held {
  account: PrivateKeyAccount;
  address: Address;
}

interface Plan {
  row: MetaTxnRow;
  sender?: Address;
  overrides: NonceOverride[];
}

/**
 * The simple dispatch path: a loop per chain that signs queued meta-transactions in nonce order,
 * records each signed transaction before broadcasting it, and reads receipts once per new block.
 * Senders are leased in the database, so two processes never sign for one sender at once.
 */
export class Dispatcher {
  readonly owner = `${hostname()}:${process.pid}:${randomBytes(4).toString('hex')}`;
  private readonly accounts: Map<Address, PrivateKeyAccount>;
  private held: Held[] = [];
  private running = false;
  private loop?: Promise<void>;
  private wake?: () => void;
  private lastBlock = -1n;
  private pendingCount = 0;

  constructor(
    private readonly relayer: ChainRelayer,
    private readonly deps: { db: Db; metaTxns: MetaTxnRepo; events: RelayEvents; log: Logger },
  ) {
    this.accounts = new Map(relayer.deps.config.senderKeys.map((k) => {
      const a = privateKeyToAccount(k as Hex);
      return [a.address.toLowerCase() as Address, a];
    }));
  }

  private get chainId() {
    return this.relayer.chainId;
  }
  private get client() {
    return this.relayer.client;
  }

  start() {
    if (this.running) return;
    this.running = true;
    this.loop = (async () => {
      while (this.running) {
        try {
          await this.tick();
        } catch (err) {
          this.deps.log.warn({ err: errorText(err), chainId: this.chainId }, 'relayer dispatch tick failed');
        }
        if (!this.running) break;
        await new Promise<void>((resolve) => {
          const t = setTimeout(resolve, this.relayer.deps.config.pollMs);
          this.wake = () => {
            clearTimeout(t);
            resolve();
          };
        });
      }
    })();
  }

  nudge() {
    this.wake?.();
  }

  async stop() {
    this.running = false;
    this.wake?.();
    await this.loop;
    // Hand the senders back at once so another process can take over without waiting out the lease.
    await this.deps.db
      .query('UPDATE relay_senders SET owner = NULL, lease_until = NULL WHERE chain_id = $1 AND owner = $2', [this.chainId, this.owner])
      .catch(() => undefined);
  }

  async tick() {
    await this.claimSenders();
    if (this.held.length === 0) return;
    await this.sendReady();
    await this.sweep();
  }

  private async claimSenders() {
    const r = await this.deps.db.query<{ address: string; next_nonce: string | null; fresh: boolean }>(
      `INSERT INTO relay_senders (chain_id, address, owner, lease_until)
       SELECT $1, a, $2, now() + make_interval(secs => $4) FROM unnest($3::text[]) AS a
       ON CONFLICT (chain_id, address) DO UPDATE SET owner = EXCLUDED.owner, lease_until = EXCLUDED.lease_until, updated_at = now()
         WHERE relay_senders.owner = EXCLUDED.owner OR relay_senders.lease_until IS NULL OR relay_senders.lease_until < now()
       RETURNING address, next_nonce`,
      [this.chainId, this.owner, [...this.accounts.keys()], LEASE_SEC],
    );
    const before = new Set(this.held.map((h) => h.address));
    this.held = r.rows.map((x) => ({ address: x.address as Address, account: this.accounts.get(x.address as Address)! }));
    // A sender newly taken over starts from what the chain says, never below it.
    for (const x of r.rows) if (!before.has(x.address as Address) || x.next_nonce == null) await this.ledgerFromChain(x.address as Address, 'resync');
  }

  /**
   * Sets a sender's ledger from the chain's pending count: never below the ledger when taking a sender
   * over (`resync`), exactly to it after a refused broadcast (`rewind`: nothing later was signed this tick).
   */
  private async ledgerFromChain(address: Address, mode: 'resync' | 'rewind') {
    const pending = await this.client.getTransactionCount({ address, blockTag: 'pending' });
    const value = mode === 'resync' ? 'GREATEST(COALESCE(next_nonce, 0), $3)' : '$3';
    await this.deps.db.query(`UPDATE relay_senders SET next_nonce = ${value}, updated_at = now() WHERE chain_id = $1 AND address = $2`, [this.chainId, address, pending]);
  }

  private async drop(row: MetaTxnRow, reason: string) {
    await this.deps.metaTxns.setStatus(this.deps.db, this.chainId, row.id, { status: 'DROPPED', revert_reason: reason });
    this.deps.log.info({ chainId: this.chainId, id: row.id, reason }, 'meta-transaction dropped');
    this.deps.events.emit(this.chainId, row.id);
  }

  /** Which queued meta-transactions can go now, and on which sender (a successor rides with its predecessor). */
  private async plan(rows: MetaTxnRow[]): Promise<Plan[]> {
    const timeoutMs = this.relayer.deps.config.queueTimeoutSec * 1000;
    const withBundles = await Promise.all(rows.map(async (row) => ({ row, bundles: await this.deps.metaTxns.bundlesOf(this.chainId, row.id) })));
    const flat = withBundles.flatMap((w) => w.bundles.map((b) => ({ wallet: b.wallet as Address, space: BigInt(b.nonce_space) })));
    const nonces = await readNonces(this.client, flat);
    let k = 0;
    const plans: Plan[] = [];
    for (const { row, bundles } of withBundles) {
      let sender: Address | undefined;
      let ready = true;
      let dropped: string | undefined;
      const overrides: NonceOverride[] = [];
      for (const b of bundles) {
        const current = nonces[k++];
        const n = BigInt(b.nonce);
        if (n < current) dropped ??= `nonce ${n} of space ${b.nonce_space} was used by another transaction (wallet ${b.wallet} is at ${current})`;
        if (n <= current) continue;
        const pred = await this.deps.metaTxns.holderOf(this.chainId, b.wallet, b.nonce_space, (n - 1n).toString());
        if (pred?.status === 'SENT' && pred.sender && (!sender || sender === pred.sender)) {
          sender = pred.sender as Address;
          overrides.push({ wallet: b.wallet as Address, space: BigInt(b.nonce_space), nonce: n });
        } else ready = false;
      }
      if (dropped) await this.drop(row, dropped);
      else if (ready) plans.push({ row, sender, overrides });
      else if (Date.now() - row.queued_at.getTime() > timeoutMs) await this.drop(row, `its nonce did not come up within ${this.relayer.deps.config.queueTimeoutSec} s`);
    }
    return plans;
  }

  private async sendReady() {
    const rows = await this.deps.metaTxns.queued(this.chainId, BATCH);
    if (rows.length === 0) return;
    const plans = await this.plan(rows);
    if (plans.length === 0) return;
    const fees = await this.feeSnapshot();
    const load = new Map<Address, number>(this.held.map((h) => [h.address, 0]));
    const stalled = new Set<Address>();
    for (const plan of plans) {
      let sender = plan.sender;
      if (sender && !load.has(sender)) continue; // its predecessor's sender belongs to another process now
      sender ??= [...load].filter(([a]) => !stalled.has(a)).sort((a, b) => a[1] - b[1])[0]?.[0];
      if (!sender || stalled.has(sender)) continue;
      const ok = await this.dispatch(plan, sender, fees);
      if (ok) load.set(sender, (load.get(sender) ?? 0) + 1);
      else stalled.add(sender);
    }
  }

  private async feeSnapshot() {
    const block = await this.client.getBlock({ blockTag: 'latest' });
    if (block.baseFeePerGas != null) {
      const priority = await this.client.estimateMaxPriorityFeePerGas().catch(() => 1_000_000_000n);
      return { type: 'eip1559' as const, maxFeePerGas: block.baseFeePerGas * 2n + priority, maxPriorityFeePerGas: priority };
    }
    return { type: 'legacy' as const, gasPrice: await this.client.getGasPrice() };
  }

  /** Re-simulates, signs, records, then broadcasts one meta-transaction. False: this sender stops for this tick. */
  private async dispatch(plan: Plan, sender: Address, fees: Awaited<ReturnType<Dispatcher['feeSnapshot']>>): Promise<boolean> {
    const { row } = plan;
    const r = this.relayer;
    // The state may have moved since intake: never sign what would now revert or no longer pay.
    const tokens = probeTokens(r.feeTokens);
    const sim = await simulateExact(this.client, {
      sender,
      entrypoint: row.entrypoint as Address,
      input: row.input as Hex,
      payee: r.paymentAddress.toLowerCase() as Address,
      tokens,
      nonces: plan.overrides,
      gasCap: BigInt(r.deps.config.maxGasLimit),
    });
    if (!sim.ok) {
      await this.drop(row, `no longer executes: ${sim.reason}`);
      return true;
    }
    if (row.fee_token) {
      const i = r.feeTokens.findIndex((t) => tokenKey(t) === row.fee_token);
      if (i < 0 || (sim.paid[i] ?? 0n) < BigInt(row.fee_value ?? '0')) {
        await this.drop(row, 'the bundle no longer pays the fee it was accepted with');
        return true;
      }
    }
    const gas = BigInt(row.gas_limit) > (sim.estimate ?? 0n) ? BigInt(row.gas_limit) : sim.estimate!;
    const account = this.accounts.get(sender)!;

    let raw: Hex;
    let hash: Hex;
    let nonce: number;
    try {
      ({ raw, hash, nonce } = await this.deps.db.transaction(async (tx) => {
        const led = await tx.query<{ next_nonce: string }>(
          'SELECT next_nonce FROM relay_senders WHERE chain_id = $1 AND address = $2 AND owner = $3 FOR UPDATE',
          [this.chainId, sender, this.owner],
        );
        if (!led.rows[0]) throw new LostLease();
        const n = Number(led.rows[0].next_nonce);
        const base = { chainId: this.chainId, nonce: n, to: row.entrypoint as Address, data: row.input as Hex, gas };
        const signed = await account.signTransaction(fees.type === 'eip1559' ? { ...base, type: 'eip1559', maxFeePerGas: fees.maxFeePerGas, maxPriorityFeePerGas: fees.maxPriorityFeePerGas } : { ...base, type: 'legacy', gasPrice: fees.gasPrice });
        const h = keccak256(signed);
        await tx.query('UPDATE relay_senders SET next_nonce = $3, updated_at = now() WHERE chain_id = $1 AND address = $2', [this.chainId, sender, n + 1]);
        await tx.query(
          `INSERT INTO relay_txs (chain_id, sender, nonce, meta_txn_id, hash, raw, gas_limit, max_fee, max_priority_fee, gas_price)
           VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10)`,
          [this.chainId, sender, n, row.id, h, signed, gas.toString(), fees.type === 'eip1559' ? fees.maxFeePerGas.toString() : null, fees.type === 'eip1559' ? fees.maxPriorityFeePerGas.toString() : null, fees.type === 'legacy' ? fees.gasPrice.toString() : null],
        );
        await this.setSent(tx, row.id, sender, n, h);
        return { raw: signed, hash: h, nonce: n };
      }));
    } catch (err) {
      if (err instanceof LostLease) return false;
      throw err;
    }

    try {
      await this.client.request({ method: 'eth_sendRawTransaction', params: [raw] });
    } catch (err) {
      const kind = classifySendError(err);
      if (kind === 'known' || kind === 'transport') {
        // Known: it is in the pool. Transport: it may be; the sweep looks the hash up before anything else.
        this.deps.log.warn({ chainId: this.chainId, hash, kind, err: errorText(err) }, 'broadcast uncertain; the block sweep will resolve it');
      } else {
        await this.refused(row, sender, nonce, hash, kind, errorText(err));
        return false;
      }
    }
    await this.deps.db.query('UPDATE relay_txs SET broadcast_at = now() WHERE chain_id = $1 AND hash = $2', [this.chainId, hash]);
    this.pendingCount++;
    this.deps.events.emit(this.chainId, row.id);
    return true;
  }

  private async setSent(q: Queryable, id: string, sender: Address, nonce: number, hash: Hex) {
    await this.deps.metaTxns.setStatus(q, this.chainId, id, { status: 'SENT', sender, txn_nonce: nonce, txn_hash: hash, sent_at: new Date() });
  }

  /** The node said no: the transaction does not exist, so its meta-transaction goes back to the queue. */
  private async refused(row: MetaTxnRow, sender: Address, nonce: number, hash: Hex, kind: string, message: string) {
    this.deps.log.warn({ chainId: this.chainId, sender, nonce, hash, kind, err: message }, 'broadcast refused');
    const attempts = row.attempts + 1;
    await this.deps.db.transaction(async (tx) => {
      await tx.query(`UPDATE relay_txs SET status = 'FAILED', error = $3 WHERE chain_id = $1 AND hash = $2`, [this.chainId, hash, message.slice(0, 500)]);
      if (attempts >= MAX_ATTEMPTS) {
        await this.deps.metaTxns.setStatus(tx, this.chainId, row.id, { status: 'DROPPED', revert_reason: `the node refused it ${attempts} times: ${message.slice(0, 300)}`, attempts });
      } else {
        await this.deps.metaTxns.setStatus(tx, this.chainId, row.id, {
          status: 'QUEUED',
          attempts,
          txn_hash: null,
          sender: null,
          txn_nonce: null,
          next_attempt_at: new Date(Date.now() + 1000 * 2 ** attempts),
        });
      }
    });
    await this.ledgerFromChain(sender, 'rewind');
    this.deps.events.emit(this.chainId, row.id);
  }

  /** One pass over every transaction in flight per new block: receipts, and re-broadcasts of dropped ones. */
  private async sweep() {
    const head = await this.client.getBlockNumber({ cacheTime: 0 });
    if (head === this.lastBlock && this.pendingCount === 0) return;
    this.lastBlock = head;
    this.pendingCount = 0;
    const mine = this.held.map((h) => h.address);
    const r = await this.deps.db.query<{ hash: Hex; raw: Hex; meta_txn_id: string; sender: Address; nonce: string; created_at: Date }>(
      `SELECT hash, raw, meta_txn_id, sender, nonce::text AS nonce, created_at FROM relay_txs WHERE chain_id = $1 AND status = 'PENDING' AND sender = ANY($2) ORDER BY id`,
      [this.chainId, mine],
    );
    if (r.rows.length === 0) return;
    const receipts = await Promise.all(
      r.rows.map((t) => this.client.request({ method: 'eth_getTransactionReceipt', params: [t.hash] }) as Promise<RawReceipt | null>),
    );
    for (let i = 0; i < r.rows.length; i++) {
      const t = r.rows[i];
      const receipt = receipts[i];
      if (receipt) await this.finalize(t.meta_txn_id, t.hash, receipt);
      else await this.rebroadcastIfLost(t);
    }
  }

  private async rebroadcastIfLost(t: { hash: Hex; raw: Hex; meta_txn_id: string; sender: Address }) {
    const known = await this.client.request({ method: 'eth_getTransactionByHash', params: [t.hash] }).catch(() => undefined);
    if (known !== null) return; // in the pool (or the node did not answer)
    try {
      await this.client.request({ method: 'eth_sendRawTransaction', params: [t.raw] });
      this.deps.log.info({ chainId: this.chainId, hash: t.hash }, 're-broadcast a transaction the node had lost');
    } catch (err) {
      const kind = classifySendError(err);
      if (kind === 'nonceTooLow') {
        // Its nonce was consumed by another transaction and no receipt of ours exists: it will never be mined.
        const row = await this.deps.metaTxns.find(this.chainId, t.meta_txn_id);
        if (row && row.status === 'SENT') {
          await this.refused(row, t.sender, -1, t.hash, kind, errorText(err));
        }
      }
    }
  }

  private async finalize(metaId: string, hash: Hex, receipt: RawReceipt) {
    const bundles = await this.deps.metaTxns.bundlesOf(this.chainId, metaId);
    const outcome = outcomeOf(receipt, metaId, bundles);
    const block = Number(BigInt(receipt.blockNumber));
    await this.deps.db.transaction(async (tx) => {
      await tx.query(`UPDATE relay_txs SET status = 'MINED', mined_block = $3 WHERE chain_id = $1 AND hash = $2`, [this.chainId, hash, block]);
      await this.deps.metaTxns.setStatus(tx, this.chainId, metaId, {
        status: outcome.status,
        revert_reason: outcome.reason,
        txn_hash: hash,
        block_number: block,
        gas_used: receipt.gasUsed ? Number(BigInt(receipt.gasUsed)) : null,
        gas_price: receipt.effectiveGasPrice ? BigInt(receipt.effectiveGasPrice).toString() : null,
        receipt: JSON.stringify(receipt),
        mined_at: new Date(),
      });
    });
    this.deps.events.emit(this.chainId, metaId);
  }
}

class LostLease extends Error {}
