import { keccak256, parseEther, type Address, type Hex } from 'viem';
import { privateKeyToAccount } from 'viem/accounts';
import type { ChainClient } from '../../chain/client.ts';
import type { Db } from '../../store/db.ts';
import type { Logger } from '../../telemetry/logger.ts';
import type { Metrics } from '../../telemetry/metrics.ts';

/*
 * Sender refill (alto's utility wallet): a treasury key per chain tops a sender up to `targetBalance`
 * when a sweep sees it below `minSenderBalance`. Only the process holding the sender sweeps it, one
 * refill per sender is in flight at a time, and the treasury's own nonce is taken under a database
 * lock, so two processes (or two chains' relayers sharing a treasury) never sign one nonce twice.
 * Every transfer is recorded before it is broadcast, then settled from its receipt.
 */

/** A refill that failed (e.g. an empty treasury) is not tried again for this sender before this. */
const RETRY_AFTER_SEC = 60;
/** A broadcast refill the node does not know after this long is given up (the next sweep sends another). */
const LOST_AFTER_SEC = 300;

export interface RefillConfig {
  treasuryKey: string;
  targetBalance: string;
  minSenderBalance: string;
}

export class SenderRefill {
  private readonly account;
  readonly treasury: Address;

  constructor(
    private readonly chain: ChainClient,
    private readonly db: Db,
    private readonly config: RefillConfig,
    private readonly log: Logger,
    private readonly metrics?: Metrics,
  ) {
    this.account = privateKeyToAccount(config.treasuryKey as Hex);
    this.treasury = this.account.address;
  }

  private count(outcome: 'sent' | 'mined' | 'failed' | 'unfunded') {
    this.metrics?.relaySenderRefills.inc({ chain: String(this.chain.chainId), outcome });
  }

  /** Called by the sweep with the balances it just read: settles open refills, then starts what is due. */
  async check(senders: { address: Address; balance: bigint }[]): Promise<void> {
    const floor = parseEther(this.config.minSenderBalance);
    const target = parseEther(this.config.targetBalance);
    const open = await this.settle();
    for (const s of senders) {
      if (floor === 0n || s.balance >= floor || open.has(s.address.toLowerCase())) continue;
      await this.send(s.address, target - s.balance);
    }
  }

  /** Pending refills: mined (or reverted) from their receipts; lost ones given up. Returns senders still waiting. */
  private async settle(): Promise<Set<string>> {
    const pending = await this.db.query<{ id: string; hash: Hex; sender: string; age: string }>(
      `SELECT id::text AS id, hash, sender, EXTRACT(EPOCH FROM now() - created_at)::text AS age FROM sender_refills WHERE chain_id = $1 AND status = 'PENDING'`,
      [this.chain.chainId],
    );
    const waiting = new Set<string>();
    for (const p of pending.rows) {
      const receipt = await this.chain.public.getTransactionReceipt({ hash: p.hash }).catch(() => null);
      if (receipt) {
        const ok = receipt.status === 'success';
        await this.db.query(`UPDATE sender_refills SET status = $2, block_number = $3, error = $4, updated_at = now() WHERE id = $1`, [
          p.id,
          ok ? 'MINED' : 'FAILED',
          Number(receipt.blockNumber),
          ok ? null : 'reverted',
        ]);
        if (ok) this.log.info({ chainId: this.chain.chainId, sender: p.sender, hash: p.hash }, 'sender refilled from the treasury');
        this.count(ok ? 'mined' : 'failed');
        continue;
      }
      if (Number(p.age) > LOST_AFTER_SEC && !(await this.chain.public.getTransaction({ hash: p.hash }).catch(() => null))) {
        await this.db.query(`UPDATE sender_refills SET status = 'FAILED', error = 'not mined, and unknown to the node', updated_at = now() WHERE id = $1`, [p.id]);
        this.count('failed');
        continue;
      }
      waiting.add(p.sender);
    }
    return waiting;
  }

  private async send(sender: Address, amount: bigint) {
    const chainId = this.chain.chainId;
    const to = sender.toLowerCase();
    await this.db.transaction(async (tx) => {
      // This transaction waits on the chain's node (reads, then the broadcast) while it holds the treasury's
      // lock: the session's idle-in-transaction bound (config postgres) must not end it mid-send. Only
      // other refills wait on that lock.
      await tx.query('SET LOCAL idle_in_transaction_session_timeout = 0');
      // One signer of the treasury at a time, across processes and chains.
      await tx.query('SELECT pg_advisory_xact_lock(7250018, $1::int)', [Number.parseInt(this.treasury.slice(2, 9), 16)]);
      const recent = await tx.query(
        `SELECT 1 FROM sender_refills WHERE chain_id = $1 AND sender = $2 AND (status = 'PENDING' OR (status = 'FAILED' AND updated_at > now() - make_interval(secs => $3))) LIMIT 1`,
        [chainId, to, RETRY_AFTER_SEC],
      );
      if (recent.rows.length) return;
      const pub = this.chain.public;
      const [nonce, fees, funds] = await Promise.all([
        pub.getTransactionCount({ address: this.treasury, blockTag: 'pending' }),
        pub.estimateFeesPerGas().catch(async () => ({ gasPrice: await pub.getGasPrice(), maxFeePerGas: undefined, maxPriorityFeePerGas: undefined })),
        pub.getBalance({ address: this.treasury }),
      ]);
      this.metrics?.relayTreasuryBalance.set({ chain: String(chainId) }, Number(funds));
      const gas = 21_000n;
      const price = fees.maxFeePerGas ?? fees.gasPrice ?? 0n;
      if (funds < amount + gas * price) {
        await tx.query(`INSERT INTO sender_refills (chain_id, sender, treasury, amount_wei, hash, status, error) VALUES ($1, $2, $3, $4, '', 'FAILED', $5)`, [
          chainId,
          to,
          this.treasury.toLowerCase(),
          amount.toString(),
          `the treasury holds ${funds} wei, not enough for ${amount} wei and gas`,
        ]);
        this.log.warn({ chainId, sender, treasury: this.treasury, funds: funds.toString(), amount: amount.toString() }, 'sender below its floor, and the treasury cannot refill it');
        this.count('unfunded');
        return;
      }
      const raw = await this.account.signTransaction(
        fees.maxFeePerGas != null
          ? { chainId, to: sender, value: amount, nonce, gas, maxFeePerGas: fees.maxFeePerGas, maxPriorityFeePerGas: fees.maxPriorityFeePerGas ?? 0n, type: 'eip1559' }
          : { chainId, to: sender, value: amount, nonce, gas, gasPrice: price, type: 'legacy' },
      );
      const hash = keccak256(raw);
      // Recorded before it is broadcast: a crash in between leaves a row the next sweep settles or gives up.
      await tx.query(`INSERT INTO sender_refills (chain_id, sender, treasury, amount_wei, hash) VALUES ($1, $2, $3, $4, $5)`, [chainId, to, this.treasury.toLowerCase(), amount.toString(), hash]);
      try {
        await pub.sendRawTransaction({ serializedTransaction: raw });
        this.count('sent');
      } catch (err) {
        const msg = (err as Error).message.split('\n')[0];
        await tx.query(`UPDATE sender_refills SET status = 'FAILED', error = $2, updated_at = now() WHERE hash = $1 AND chain_id = $3`, [hash, msg.slice(0, 500), chainId]);
        this.log.warn({ chainId, sender, hash, err: msg }, 'sender refill refused by the node');
        this.count('failed');
      }
    });
  }
}

/** The latest refills of a chain and the treasury, as RuntimeStatus and the console's Health page show them. */
export async function refillStatus(db: Db, chain: Pick<ChainClient, 'chainId' | 'public'>, treasury: Address | null) {
  if (!treasury) return null;
  const [rows, balance] = await Promise.all([
    db.query<{ sender: string; amount_wei: string; hash: string; status: string; error: string | null; block_number: string | null; created_at: Date }>(
      `SELECT sender, amount_wei::text AS amount_wei, hash, status, error, block_number::text AS block_number, created_at FROM sender_refills
        WHERE chain_id = $1 ORDER BY created_at DESC, id DESC LIMIT 10`,
      [chain.chainId],
    ),
    chain.public.getBalance({ address: treasury }).catch(() => null),
  ]);
  return {
    treasury,
    treasuryBalanceWei: balance?.toString() ?? null,
    recent: rows.rows.map((r) => ({
      sender: r.sender,
      amountWei: r.amount_wei,
      txnHash: r.hash || null,
      status: r.status,
      error: r.error,
      blockNumber: r.block_number == null ? null : Number(r.block_number),
      createdAt: new Date(r.created_at).toISOString(),
    })),
  };
}
