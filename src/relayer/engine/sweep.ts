import { parseEther, type Address, type Hex } from 'viem';
import { askAgain } from '../../util/ask-again.ts';
import { isRateLimited } from '../../chain/node-errors.ts';
import {
  attemptError,
  authorizationsOf,
  broadcast,
  confirmAttempts,
  failAttempt,
  failTaken,
  insertAttempt,
  markBroadcast,
  markMined,
  noteBroadcast,
  openAttempts,
  sign,
  confirmedFrom,
  type Attempt,
} from './attempts.ts';
import { ownedNextNonces, recordSenderRead } from './ledger.ts';
import type { EngineContext, SenderState } from './context.ts';
import { marketFees, type Fees, type Market } from './gas-price.ts';
import { boundedReplacement, coverCeiling } from './cover-ceiling.ts';
import type { RawReceipt } from '../receipts.ts';
import { announceBalanceLevel, type BalanceLevel } from './balance-level.ts';
import { BlockReceipts } from './block-receipts.ts';
import { mendLedger } from './ledger-mend.ts';
import { settleMined, slotKey } from './settle.ts';
import { reopenSlot } from './slot-owners.ts';
import { freeSlot, pricedOut } from './unblock.ts';

/** Heads a slot may look mined (chain nonce past it) with none of our receipts before it counts as taken. */
const RECEIPT_GRACE_HEADS = 2;
interface Slot {
  sender: Address;
  nonce: number;
  attempts: Attempt[];
}

/**
 * A sender's mined-transaction count at the head swept, not at "latest": a load-balanced provider's node
 * a block behind answers "latest" from before the block just read, where the sender's last transaction
 * is not mined yet, and on a chain that mines only when sent to, no new head comes to sweep again: the
 * receipt waited for the idle sweep (3 s). Pinned, such a node refuses the block ("header not found")
 * and is asked again (util/ask-again.ts), a fresh chance at another node; none answering, "latest" stands.
 */
function minedCountAt(client: EngineContext['client'], address: Address, head: number): Promise<number> {
  // A rate-limited node is not asked again at once: the call already waited out its budget (call-budget.ts).
  return askAgain(
    () => client.getTransactionCount({ address, blockNumber: BigInt(head) }),
    (err) => !isRateLimited(err),
    PINNED_COUNT_TRIES,
  ).catch((err) => {
    if (isRateLimited(err)) throw err;
    return client.getTransactionCount({ address, blockTag: 'latest' });
  });
}
const PINNED_COUNT_TRIES = 3;

/** Reads in a row without the block of a mined transaction before it is taken as reorged away. */
const MISSES_FOR_REORG = 3;

interface Hit {
  slot: Slot;
  winner: Attempt;
  receipt: RawReceipt;
}

/**
 * The once-per-head reconciliation of every in-flight transaction of the held senders. It reads two
 * nonce counts and a balance per sender, then asks for receipts only of slots the chain's `latest`
 * count says were mined, so its cost follows what changed, not how much is in flight.
 */
export class Sweeper {
  private readonly missingSince = new Map<string, number>();
  private market?: Market;
  private readonly receipts: BlockReceipts;
  /** The balance level last recorded per sender: the database is asked only when it seems to change. */
  private readonly levels = new Map<string, BalanceLevel>();
  /** Set when something changed that must be looked at again before the next block (a reorg). */
  private again = false;
  /** Set when a reorg deeper than the confirmations put final attempts back to waiting during the reads. */
  private reopened = false;
  /** The highest mined-transaction count read per sender. */
  private readonly noncesSeen = new Map<string, number>();
  /** Reads in a row that found no block where a mined transaction was recorded, per transaction. */
  private readonly blockMisses = new Map<string, { reads: number }>();
  /** The last sweep found no attempt of a held sender pending or awaiting confirmations. */
  quiet = false;
  /** Each held sender's last counts and balance read from the node, and when. */
  private readonly seen = new Map<Address, { latest: number; pending: number; balance: bigint; at: number; balanceAt: number }>();
  /** The head at which each waiting slot's last attempt was first seen under the next base fee (unblock.ts). */
  private readonly pricedOutSince = new Map<string, number>();

  constructor(private readonly d: EngineContext) {
    this.receipts = new BlockReceipts(d.client);
  }

  private get db() {
    return this.d.db;
  }

  /** Reconciles the held senders' slots at `head`; returns what it learnt of each sender and whether to sweep again at once. */
  async sweep(head: number, held: readonly Address[], stopped: ReadonlySet<Address>, full = false): Promise<{ senders: Map<Address, SenderState>; again: boolean; market?: Market }> {
    const d = this.d;
    const senders = [...held];
    const states = new Map<Address, SenderState>();
    this.again = false;
    this.market = undefined;
    const floor = parseEther(d.config.minSenderBalance);
    const attempts = await openAttempts(this.db, d.chainId, senders);
    const next = await ownedNextNonces(this.db, d.chainId, d.owner);
    const lowestOpen = new Map<Address, number>();
    for (const a of attempts) if (!lowestOpen.has(a.sender)) lowestOpen.set(a.sender, a.nonce);
    for (const a of [...this.seen.keys()]) if (!held.includes(a)) this.seen.delete(a);
    // Only senders with a transaction not yet mined (or whose ledger moved, or below their floor) are read
    // every head; a quiet one's last read stands for relayer.quietSenderReadMs. A sender whose
    // transactions are all mined, awaiting confirmations, is quiet too: what it waits for is a block,
    // which watchMined reads, not a count (read at every head, such senders cost 3 calls a block each
    // for `confirmations` blocks after every transaction). `full` (a refusal, a takeover) reads all.
    const busy = new Set(attempts.filter((a) => a.status === 'PENDING').map((a) => a.sender));
    this.quiet = attempts.length === 0;
    const reads = await Promise.all(
      senders.map(async (address) => {
        const was = this.seen.get(address);
        const now = Date.now();
        const quiet = !full && was && !busy.has(address) && next.get(address) === was.pending && (floor === 0n || was.balance >= floor) && now - was.at < d.config.quietSenderReadMs;
        if (quiet) return { address, latest: was.latest, pending: was.pending, balance: was.balance };
        const [latest, pending] = await Promise.all([minedCountAt(d.client, address, head), d.client.getTransactionCount({ address, blockTag: 'pending' })]);
        // A node behind (a load-balanced provider's) counts fewer mined transactions than one already
        // seen: the count never goes below what was seen, so no mined slot is taken as waiting and
        // replaced. A reorg that really unmines one forgets the count (watchMined).
        // A count below one already seen is a node behind, or a reorg deeper than the confirmations that
        // took final transactions away: deepReorg tells which, and reopens what was lost.
        // So is a count below our lowest open slot (or the ledger, none open): a slot in between is missing
        // from what we watch, final ones a deep reorg took included (a process that just took the sender over
        // has seen no count yet). Steady state, the count is the lowest open slot: no extra read.
        const known = this.noncesSeen.get(address) ?? 0;
        const seen = latest < known || latest < (lowestOpen.get(address) ?? next.get(address) ?? 0) ? await this.deepReorg(address, latest, head) : known;
        const counted = Math.max(latest, seen);
        this.noncesSeen.set(address, counted);
        // The balance moves when one of the sender's transactions is mined (its count moves), and now and
        // then otherwise (a refill, a deposit): read then, not at every head a transaction is in flight.
        const fresh = was && !full && counted === was.latest && (floor === 0n || was.balance >= floor) && now - was.balanceAt < d.config.quietSenderReadMs;
        const balance = fresh ? was.balance : await d.client.getBalance({ address });
        const read = { latest: counted, pending: Math.max(pending, counted), balance };
        this.seen.set(address, { ...read, at: now, balanceAt: fresh ? was.balanceAt : now });
        return { address, ...read };
      }),
    );
    // Final transactions went back to waiting: the attempts read above are stale, so the sweep starts over
    // (once) and re-broadcasts them in this pass rather than filling their nonces or rewinding the ledger.
    if (this.reopened) {
      this.reopened = false;
      return this.sweep(head, held, stopped, true);
    }
    const slots = new Map<string, Slot>();
    for (const a of attempts) {
      const k = slotKey(a.sender, a.nonce);
      if (!slots.has(k)) slots.set(k, { sender: a.sender, nonce: a.nonce, attempts: [] });
      slots.get(k)!.attempts.push(a);
    }

    // Settle first, for every sender at once (one database transaction each), then the waiting slots.
    const bySender = new Map(reads.map((r) => [r.address, [...slots.values()].filter((s) => s.sender === r.address).sort((a, b) => a.nonce - b.nonce)]));
    const isMined = (s: Slot) => s.attempts.some((a) => a.status === 'MINED');
    await this.resolveMined(
      reads.flatMap((r) => bySender.get(r.address)!.filter((s) => s.nonce < r.latest && !isMined(s))),
      head,
    );
    await this.watchMined([...slots.values()].filter(isMined), head);

    let capped = 0;
    const waitingKeys = new Set<string>();
    for (const r of reads) {
      const mine = bySender.get(r.address)!;
      const belowFloor = floor > 0n && r.balance < floor;
      const waiting = mine.filter((s) => s.nonce >= r.latest && s.attempts.every((a) => a.status === 'PENDING'));
      // In flight = not mined yet; mined slots awaiting confirmations do not hold a sender back.
      d.metrics?.relaySenderBalance.set({ chain: d.chainName, sender: r.address }, Number(r.balance));
      d.metrics?.relaySenderBelowFloor.set({ chain: d.chainName, sender: r.address }, belowFloor ? 1 : 0);
      d.metrics?.relaySenderStopped.set({ chain: d.chainName, sender: r.address }, stopped.has(r.address) ? 1 : 0);
      let stalled: string | null = null;
      for (const s of waiting) {
        waitingKeys.add(slotKey(s.sender, s.nonce));
        const { capped: why, pricedOut: out } = await this.nudgeSlot(s, head, r.pending);
        if (why) capped++;
        // A slot that cannot be mined next block (or replaced past its cap) holds every later nonce: no new work.
        if (why ?? out) stalled ??= `nonce ${s.nonce}: ${why ?? out}`;
      }
      states.set(r.address, { latest: r.latest, pending: r.pending, balance: r.balance, belowFloor, open: waiting.length, stalled: stalled != null });
      await mendLedger(this.d, () => this.fees(), r.address, r.pending, next.get(r.address) ?? null, mine, head);
      await recordSenderRead(this.db, d.chainId, r.address, { balance: r.balance, belowFloor, latest: r.latest, pending: r.pending, stalled });
      await announceBalanceLevel(d, r.address, r.balance, this.levels);
    }
    for (const k of [...this.pricedOutSince.keys()]) if (!waitingKeys.has(k)) this.pricedOutSince.delete(k);
    d.metrics?.relayFeeCapped.set({ chain: d.chainName }, capped);
    // Senders below their floor are topped up from the treasury, when one is configured (refill.ts).
    await d.refill?.check(reads).catch((err: Error) => d.log.warn({ chainId: d.chainId, err: err.message }, 'sender refill failed'));
    if (d.metrics) {
      const depth = await d.metaTxns.depth(d.chainId);
      d.metrics.relayQueue.set({ chain: d.chainName, status: 'QUEUED' }, depth.queued);
      d.metrics.relayQueue.set({ chain: d.chainName, status: 'SENT' }, depth.sent);
    }
    return { senders: states, again: this.again, market: this.market };
  }

  private async fees(): Promise<Market> {
    this.market ??= await marketFees(this.d.client, this.d.policy);
    return this.market;
  }

  private receipt(hash: Hex): Promise<RawReceipt | null> {
    return this.receipts.get(hash);
  }

  /** Slots the chain's nonce has passed: which of their attempts was mined? */
  private async resolveMined(slots: Slot[], head: number) {
    const byHash = await this.receipts.find(
      slots.flatMap((s) => s.attempts.map((a) => a.hash as Hex)),
      head,
    );
    const found = slots.map((s) => s.attempts.map((a) => ({ r: byHash.get(a.hash.toLowerCase()) ?? null, a })).find((x) => x.r));
    const hits: Hit[] = [];
    for (const [i, s] of slots.entries()) {
      const hit = found[i];
      const k = slotKey(s.sender, s.nonce);
      if (hit) {
        this.missingSince.delete(k);
        hits.push({ slot: s, winner: hit.a, receipt: hit.r! });
        continue;
      }
      // The nonce is used yet none of our hashes has a receipt: a lagging node, or another transaction took it.
      const since = this.missingSince.get(k) ?? head;
      this.missingSince.set(k, since);
      if (head - since < RECEIPT_GRACE_HEADS) continue;
      this.missingSince.delete(k);
      await this.taken(s);
    }
    await this.mined(hits, head);
  }

  /** Records which attempt of each slot was mined and settles their meta-transactions, in one transaction. */
  private async mined(hits: Hit[], head: number) {
    const d = this.d;
    if (hits.length === 0) return;
    const rows = hits.map((h) => {
      const block = Number(BigInt(h.receipt.blockNumber));
      const first = Math.min(...h.slot.attempts.map((a) => a.broadcast_block ?? block));
      d.metrics?.relayInclusionBlocks.observe({ chain: d.chainName }, Math.max(0, block - first));
      return { ...h, block, final: head - block + 1 >= d.config.confirmations };
    });
    // A receipt read from a node ahead of the head read: what follows (intake's simulations of the
    // wallet's next meta-transaction, sent once this one's receipt is out) must see at least its block.
    d.relayer.observeBlock(Math.max(...rows.map((x) => x.block)));
    const ids = await this.db.transaction(async (tx) => {
      await markMined(
        tx,
        d.chainId,
        rows.map((x) => ({ sender: x.slot.sender, nonce: x.slot.nonce, winner: x.winner.hash, final: x.final, block: x.block, blockHash: x.receipt.blockHash })),
      );
      return settleMined(this.d, tx, rows);
    });
    for (const id of ids) d.emit(id);
  }

  /** Another transaction used the slot's nonce: ours never ran; their meta-transactions go back to the queue. */
  private async taken(s: Slot) {
    const d = this.d;
    d.log.warn({ chainId: d.chainId, sender: s.sender, nonce: s.nonce }, 'a slot was taken by a transaction this relayer did not sign');
    const ids = await this.db.transaction(async (tx) => {
      await failTaken(tx, d.chainId, s.sender, s.nonce);
      const metas = await d.metaTxns.atSlots(tx, d.chainId, [s]);
      for (const m of metas.filter((x) => x.status === 'SENT')) await d.requeueOrDrop(tx, m, 'its transaction slot was taken by another transaction');
      return metas.map((m) => m.id);
    });
    for (const id of ids) d.emit(id);
  }

  /**
   * Mined slots within the confirmation depth: still in the same block? A block hash that changed
   * means a reorg: the receipt is read again, and a transaction no longer mined goes back to SENT.
   */
  private async watchMined(slots: Slot[], head: number) {
    const d = this.d;
    if (slots.length === 0) return;
    const numbers = [...new Set(slots.map((s) => s.attempts.find((a) => a.status === 'MINED')!.mined_block!))];
    // A block the node says it has not (null) may be a reorg; a read that failed (429, 5xx, a dropped
    // connection) says nothing about the chain: undefined, looked at again without counting a miss.
    // Blocks within the confirmation depth are usually kept by the shared head reader: no call.
    const blocks = await Promise.all(
      numbers.map((n) =>
        d.chainHead.block(BigInt(n), d.client).then(
          (b) => b?.hash ?? null,
          () => undefined,
        ),
      ),
    );
    const hashAt = new Map(numbers.map((n, i) => [n, blocks[i]]));
    const confirmable: { slot: Slot; winner: Attempt }[] = [];
    for (const s of slots) {
      const winner = s.attempts.find((a) => a.status === 'MINED')!;
      const now = hashAt.get(winner.mined_block!);
      if (now === undefined) {
        this.again = true;
        continue;
      }
      // No block returned is unknown, not a reorg: a load-balanced provider answers from nodes a block
      // or two behind, and one read fails now and then. The slot is looked at again at once; only a
      // block missing from several reads in a row (a chain that really got shorter) counts as gone.
      if (now == null) {
        const m = this.blockMisses.get(winner.hash) ?? { reads: 0 };
        m.reads++;
        this.blockMisses.set(winner.hash, m);
        if (m.reads < MISSES_FOR_REORG) {
          this.again = true;
          continue;
        }
      }
      this.blockMisses.delete(winner.hash);
      if (now === winner.mined_block_hash) {
        if (head - winner.mined_block! + 1 >= d.config.confirmations) confirmable.push({ slot: s, winner });
        continue;
      }
      const receipt = await this.receipt(winner.hash);
      // The receipt still names the recorded block: the block reads were of a node behind, not a reorg.
      if (receipt && receipt.blockHash.toLowerCase() === winner.mined_block_hash?.toLowerCase()) continue;
      d.metrics?.relayReorgs.inc({ chain: d.chainName });
      this.noncesSeen.delete(s.sender);
      if (receipt) {
        d.log.info({ chainId: d.chainId, hash: winner.hash, from: winner.mined_block, to: Number(BigInt(receipt.blockNumber)) }, 'reorg moved a relay transaction');
        await this.mined([{ slot: s, winner, receipt }], head);
        continue;
      }
      d.log.warn({ chainId: d.chainId, hash: winner.hash, block: winner.mined_block }, 'reorg removed a relay transaction; it goes back to SENT');
      // It waits again as if broadcast now: the next sweeps re-broadcast it and start its block count afresh.
      const ids = await this.db.transaction((tx) => reopenSlot(d, tx, winner, head));
      for (const id of ids) d.emit(id);
      // Sweep again at once: the transaction is likely missing from the pool and must be re-broadcast.
      this.again = true;
    }
    await this.confirm(confirmable);
  }

  /**
   * The node counts fewer mined transactions of `sender` than seen before. A node behind says so for a
   * moment; a reorg deeper than the confirmations took final transactions away for good: their receipts
   * are gone in several reads in a row. Those slots go back to waiting with the signed bytes they have
   * (re-broadcast by this sweep, never filled by a self-transfer), and their meta-transactions to SENT
   * ('reorged'). Returns the count to go by from now.
   */
  private async deepReorg(sender: Address, latest: number, head: number): Promise<number> {
    const d = this.d;
    const seen = this.noncesSeen.get(sender) ?? 0;
    const lost = await confirmedFrom(this.db, d.chainId, sender, latest);
    const receipts = await Promise.all(lost.map((a) => this.receipt(a.hash).catch(() => undefined)));
    const gone = lost.filter((_, i) => receipts[i] === null);
    const key = `deep:${sender}`;
    if (gone.length === 0) {
      this.blockMisses.delete(key);
      return seen;
    }
    const m = this.blockMisses.get(key) ?? { reads: 0 };
    m.reads++;
    this.blockMisses.set(key, m);
    if (m.reads < MISSES_FOR_REORG) {
      this.again = true;
      return seen;
    }
    this.blockMisses.delete(key);
    d.metrics?.relayDeepReorgs.inc({ chain: d.chainName }, gone.length);
    d.log.error(
      { chainId: d.chainId, sender, confirmations: d.config.confirmations, lost: gone.length, nonces: gone.map((a) => a.nonce), chainCount: latest },
      "a reorg deeper than the confirmations removed final relay transactions: their meta-transactions go back to SENT and are re-broadcast; raise this chain's confirmations",
    );
    for (const a of gone) {
      const ids = await this.db.transaction((tx) => reopenSlot(d, tx, a, head));
      for (const id of ids) d.emit(id);
    }
    this.reopened = true;
    return latest;
  }

  /** Final: past the confirmation depth in the same block. */
  private async confirm(items: { slot: Slot; winner: Attempt }[]) {
    const d = this.d;
    if (items.length === 0) return;
    await this.db.transaction(async (tx) => {
      await confirmAttempts(
        tx,
        d.chainId,
        items.map((x) => x.winner.hash),
      );
      await d.metaTxns.confirmAtSlots(
        tx,
        d.chainId,
        items.map((x) => x.slot),
      );
    });
  }

  /**
   * A slot still waiting: replaced at higher fees once it has waited resubmitAfterBlocks, re-broadcast
   * when the node's pool lacks it, freed by a self-transfer once it has stayed under the base fee for
   * unblockAfterBlocks with no replacement within its cover able to lift it (unblock.ts). Returns why it
   * cannot be replaced (`capped`: the fee cap or its cover forbids it), and why it cannot be mined in the
   * next block (`pricedOut`: its max fee under the next base fee), each null when not so.
   */
  private async nudgeSlot(s: Slot, head: number, pending: number): Promise<{ capped: string | null; pricedOut: string | null }> {
    const d = this.d;
    const last = s.attempts.at(-1)!;
    const market = await this.fees();
    const k = slotKey(s.sender, s.nonce);
    const out = pricedOut(last.fees, market);
    if (!out) this.pricedOutSince.delete(k);
    else if (!this.pricedOutSince.has(k)) this.pricedOutSince.set(k, head);
    // A filler is the relayer's own transaction: replaced at the market like any other, never freed itself.
    const stuck = out != null && last.kind !== 'filler' && head - this.pricedOutSince.get(k)! >= d.config.unblockAfterBlocks;
    if (stuck || (last.broadcast_block != null && head - last.broadcast_block >= d.config.resubmitAfterBlocks)) {
      // A filler's fees are the relayer's to raise (no cover bounds them).
      const ceiling =
        last.kind === 'filler'
          ? null
          : coverCeiling(await d.metaTxns.coversAtSlot(d.chainId, s.sender, s.nonce), BigInt(last.gas_limit), await d.relayer.l1FeeBound(last.data, last.raw.startsWith('0x04')));
      const rep = boundedReplacement(last.fees, market, d.policy, ceiling);
      const why = rep.ok ? await this.replace(s, last, rep.fees, head) : rep.reason;
      // Replaced (at least the next base fee), or refused and tried again: nothing holds the sender.
      if (!why) return { capped: null, pricedOut: null };
      if (stuck) {
        const still = await freeSlot(d, s, last, market, head, out);
        if (!still) return { capped: null, pricedOut: null };
        await d.metaTxns.setStalledAtSlot(d.chainId, s.sender, s.nonce, still);
        if (s.nonce >= pending) await this.rebroadcast(last);
        return { capped: still, pricedOut: out };
      }
      await d.metaTxns.setStalledAtSlot(d.chainId, s.sender, s.nonce, why);
      if (s.nonce >= pending) await this.rebroadcast(last);
      return { capped: why, pricedOut: out };
    }
    // Not in the pool's executable run (never arrived, dropped, or lost in a node restart): send it again.
    if (s.nonce >= pending) await this.rebroadcast(last);
    return { capped: null, pricedOut: out };
  }

  private async rebroadcast(a: Attempt) {
    const d = this.d;
    const res = await broadcast(d.client, a.raw);
    if (res.ok) {
      d.metrics?.relayBroadcasts.inc({ chain: d.chainName, kind: 'rebroadcast' });
      if (!res.uncertain) d.log.info({ chainId: d.chainId, hash: a.hash, nonce: a.nonce }, 're-broadcast a transaction missing from the pool');
      await noteBroadcast(this.db, d.chainId, a.hash);
    } else {
      // "nonce too low": it (or a sibling) was just mined; the next sweep finds the receipt.
      d.log.debug({ chainId: d.chainId, hash: a.hash, kind: res.kind, err: res.message }, 're-broadcast refused');
    }
  }

  /**
   * The same call at the same nonce with higher fees; every earlier attempt stays watched for a receipt.
   * Null when it went out (or was refused and will be tried again higher); else why it waits.
   */
  private async replace(s: Slot, last: Attempt, fees: Fees, head: number): Promise<string | null> {
    const d = this.d;
    const account = d.accounts.get(s.sender)!;
    // A type-4 attempt's replacement carries the same authorization.
    const u = { nonce: s.nonce, to: last.to_address, data: last.data, value: last.value, gas: last.gas_limit, fees, authorization: authorizationsOf(last.raw) };
    const { raw, hash } = await sign(account, d.chainId, u);
    // Signed before and refused (same fees while the market and the bound stay put): it waits, as at the cap.
    const refused = await attemptError(this.db, d.chainId, hash);
    if (refused !== undefined) return `a replacement at these fees was refused: ${(refused ?? 'no reason given').slice(0, 200)}`;
    await this.db.transaction(async (tx) => {
      await insertAttempt(tx, d.chainId, { ...u, sender: s.sender, kind: last.kind, metaTxnId: last.meta_txn_id, hash, raw, head });
      await d.metaTxns.setSlotHash(tx, d.chainId, s.sender, s.nonce, hash, 'replaced', true);
    });
    const res = await broadcast(d.client, raw);
    if (res.ok) {
      d.metrics?.relayBroadcasts.inc({ chain: d.chainName, kind: 'replacement' });
      d.log.info({ chainId: d.chainId, sender: s.sender, nonce: s.nonce, hash, replaces: last.hash }, 'replaced a transaction not included in time');
      await markBroadcast(this.db, d.chainHead, d.chainId, [hash]);
      return null;
    }
    // The replacement does not exist; the earlier attempts are still the slot's (and still watched).
    d.metrics?.relayRefused.inc({ chain: d.chainName, reason: res.kind });
    d.log.warn({ chainId: d.chainId, hash, kind: res.kind, err: res.message }, 'replacement refused');
    await failAttempt(this.db, d.chainId, hash, res.message);
    await this.db.transaction((tx) => d.metaTxns.setSlotHash(tx, d.chainId, s.sender, s.nonce, last.hash, 'replacement_refused'));
    return null;
  }
}
