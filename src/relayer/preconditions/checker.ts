import type { Address } from 'viem';
import { multicall, type CallResult } from '../../chain/multicall.ts';
import type { ChainClient } from '../../chain/client.ts';
import type { Db } from '../../store/db.ts';
import type { Logger } from '../../telemetry/logger.ts';
import { RelayError } from '../errors.ts';
import type { RelayEvents } from '../events.ts';
import { verifyQuote } from '../intake/quote.ts';
import type { ChainRelayer } from '../chain-relayer.ts';
import type { MetaTxnRepo, MetaTxnRow } from '../store.ts';
import { describe, holds, readsOf, type Precondition } from './conditions.ts';
import type { WaitRepo, Waiting } from './store.ts';

/** Admissions (each a simulation) per block; the rest are taken at the next block. */
const ADMIT_PER_BLOCK = 32;
/** Reads per eth_call: all of a chain's preconditions in one Multicall3 call unless there are very many. */
const READS_PER_CALL = 1_000;
/** Without a new block or a poke, the waiting rows are read this often: deadlines, and arrivals through other processes. */
const IDLE_READ_MS = 1_000;

export interface PreconditionDeps {
  /** The chain preconditions are read on (intake's client), in one Multicall3 call per block. */
  chain: ChainClient;
  /** The chain's maxPendingPreconditions: every waiting one is read at once. */
  maxPending: number;
  /** What fee quotes are signed with (intake/quote.ts): a waiting one's quote is honoured only while it verifies. */
  quoteSecret: string;
  db: Db;
  metaTxns: MetaTxnRepo;
  waits: WaitRepo;
  events: RelayEvents;
  log: Logger;
}

/**
 * Moves PENDING_PRECONDITION meta-transactions of one chain on: once per block (and once on arrival),
 * every waiting one's preconditions are read in one Multicall3 call at that block; those whose every precondition holds are
 * admitted as if sent now (checked, simulated, sized, funded: ChainRelayer.admit) and QUEUED, or DROPPED
 * with the reason they cannot be; those past their deadline are DROPPED naming what did not hold. Called
 * by the dispatcher every tick (so deadlines pass on a chain without blocks).
 * Several processes may run it: every transition is conditional on the row still waiting.
 */
export class PreconditionChecker {
  /** The head last judged at, and the meta-transactions judged there (each is judged once per block). */
  private judged = { head: -1, ids: new Set<string>() };
  private poked = true;
  private readAt = 0;

  constructor(
    readonly relayer: ChainRelayer,
    private readonly deps: PreconditionDeps,
  ) {}

  get chainId() {
    return this.relayer.chainId;
  }

  /** A meta-transaction started waiting in this process: judge it at the next tick, not at the next block. */
  poke() {
    this.poked = true;
  }

  /** Meta-transactions were waiting at the last read: the dispatcher then keeps reading every head. */
  private waitingSeen = false;

  /**
   * Called every dispatcher tick; reads the database only at a new head, after a poke, or every IDLE_READ_MS.
   * Says whether meta-transactions wait (as last read).
   */
  async check(head: number): Promise<boolean> {
    await this.judge(head);
    return this.waitingSeen;
  }

  private async judge(head: number) {
    const fresh = head !== this.judged.head;
    if (!fresh && !this.poked && Date.now() - this.readAt < IDLE_READ_MS) return;
    this.poked = false;
    this.readAt = Date.now();
    if (fresh) this.judged = { head, ids: new Set() };
    // Intake keeps their number within maxPendingPreconditions, so every one is read.
    const waiting = await this.deps.waits.waiting(this.chainId, this.deps.maxPending);
    this.waitingSeen = waiting.length > 0;
    // Between blocks nothing that was judged can have started to hold: only deadlines and newcomers are looked at.
    const due = waiting.filter((w) => w.expired || !this.judged.ids.has(w.row.id));
    if (due.length === 0) return;
    const verdicts = await this.read(due, head);
    let admitted = 0;
    for (const [i, w] of due.entries()) {
      const unmet = w.conditions.filter((_, j) => !verdicts[i][j]);
      if (w.expired) {
        const what = unmet.length ? unmet.map(describe).join('; ') : 'they held only after it';
        await this.drop(w.row, `preconditions not met by the deadline ${w.deadline.toISOString()}: ${what}`);
      } else if (unmet.length === 0 && admitted++ < ADMIT_PER_BLOCK) {
        await this.admit(w);
      }
      this.judged.ids.add(w.row.id);
    }
  }

  /** Whether each precondition of each meta-transaction holds at `head`: one deduplicated Multicall3 call. */
  private async read(list: Waiting[], head: number): Promise<boolean[][]> {
    const calls: { target: Address; data: `0x${string}` }[] = [];
    const index = new Map<string, number>();
    const at = (c: { target: Address; data: `0x${string}` }) => {
      const key = `${c.target}:${c.data}`;
      let i = index.get(key);
      if (i === undefined) index.set(key, (i = calls.push(c) - 1));
      return i;
    };
    const plan = list.map((w) => w.conditions.map((p) => readsOf(p).map(at)));
    const results = await multicall(this.deps.chain, calls, { blockNumber: BigInt(head), chunkSize: READS_PER_CALL });
    return list.map((w, i) =>
      w.conditions.map((p: Precondition, j) =>
        holds(
          p,
          plan[i][j].map((k): CallResult => results[k]),
        ),
      ),
    );
  }

  private async admit(w: Waiting) {
    const r = w.row;
    // A quote that ran out while the bundle waited is not held against it: it is priced now instead.
    const quote = w.quote && verifyQuote(this.deps.quoteSecret, w.quote).ok ? w.quote : undefined;
    let funded;
    try {
      funded = await this.relayer.admit(
        { projectId: r.project_id, keyId: r.key_id, clientIp: r.client_ip, walletAddress: r.wallet, contract: r.entrypoint, input: r.input, quote },
        undefined,
        // Queued, and its sponsorship charged, in one transaction: both or neither.
        async ({ sized, funded }) => {
          const moved = await this.deps.db.transaction(async (tx) => {
            const now = new Date();
            const moved = await this.deps.metaTxns.setStatus(
              tx,
              this.chainId,
              r.id,
              {
                status: 'QUEUED',
                gas_limit: sized.gasLimit.toString(),
                gas_estimated: sized.used.toString(),
                sponsored: funded.sponsored,
                sponsor_id: funded.sponsorId,
                fee_token: funded.feeToken,
                fee_value: funded.feeValue?.toString() ?? null,
                fee_payer: funded.feePayer?.toLowerCase() ?? null,
                gas_price_priced: funded.gasPricePriced?.toString() ?? null,
                cover_wei: funded.coverWei?.toString() ?? null,
                exposure_wei: funded.exposureWei?.toString() ?? null,
                fee_final: funded.feeFinal ?? null,
                client_net: this.relayer.clientNetOf({ clientIp: r.client_ip }),
                // Queued from now: the dispatcher's wait for a predecessor nonce counts from here.
                queued_at: now,
                next_attempt_at: now,
              },
              'PENDING_PRECONDITION',
            );
            if (moved) await this.relayer.charge(tx, r.id, funded, { keyId: r.key_id, clientIp: r.client_ip });
            return moved;
          });
          // Another process moved it first: what this admission held of a project balance goes back.
          if (!moved) await funded.refund();
          return moved ? funded : null;
        },
      );
    } catch (err) {
      // Not relayable now that it could run (no fee or sponsorship any more, reverts, barred): dropped.
      // Anything else (the node, the database) is tried again at the next block.
      if (err instanceof RelayError && err.kind !== 'unavailable' && err.kind !== 'rateLimited') {
        await this.drop(r, `its preconditions hold, but it is not relayed: ${err.message}`);
        return;
      }
      throw err;
    }
    if (!funded) return;
    this.deps.log.info({ chainId: this.chainId, id: r.id, sponsored: funded.sponsored }, 'meta-transaction preconditions hold: queued');
    this.deps.events.emit(this.chainId, r.id);
  }

  private async drop(row: MetaTxnRow, reason: string) {
    const text = reason.length > 1_000 ? `${reason.slice(0, 997)}...` : reason;
    if (!(await this.deps.metaTxns.setStatus(this.deps.db, this.chainId, row.id, { status: 'DROPPED', revert_reason: text }, 'PENDING_PRECONDITION'))) return;
    this.deps.log.info({ chainId: this.chainId, id: row.id, reason: text }, 'meta-transaction dropped while waiting on preconditions');
    this.deps.events.emit(this.chainId, row.id);
  }
}
