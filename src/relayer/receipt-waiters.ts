import type { RelayEvents } from './events.ts';
import { FINAL_STATUSES, type MetaTxnRow } from './store.ts';

/** How often a watched meta-transaction is re-read for changes made by other processes (local ones wake it at once). */
const REREAD_MS = 1_000;

interface Watch {
  row: MetaTxnRow;
  waiters: number;
  listeners: Set<() => void>;
}

/**
 * GetMetaTxnReceipt's long poll, made cheap: every caller waiting on one meta-transaction shares one
 * reader, which wakes on this process's status events and otherwise re-reads the row once a second;
 * waiters are capped in all and per client address, and a caller past a cap gets the current status at
 * once instead of a held request.
 */
export class ReceiptWaiters {
  private readonly watches = new Map<string, Watch>();
  private readonly perAddress = new Map<string, number>();
  private total = 0;
  /** Set by release(): a draining process holds no long poll (it would hold the shutdown open). */
  private released = false;
  private readonly held = new Set<() => void>();

  constructor(
    private readonly events: RelayEvents,
    private readonly read: (chainId: number, id: string) => Promise<MetaTxnRow | undefined>,
    private readonly limits: { max: number; perAddress: number },
  ) {}

  /** Held waiters now (RuntimeStatus, tests). */
  get size() {
    return this.total;
  }

  /**
   * Answers every held waiter now, with the status as last read, and every later wait at once: at
   * shutdown the open long polls would otherwise keep the process up for up to receiptWaitMs.
   */
  release(): void {
    this.released = true;
    for (const done of [...this.held]) done();
  }

  /** The row once its status is final, or as it is after `ms`; at once when the caps are reached or after release(). */
  async wait(chainId: number, row: MetaTxnRow, address: string, ms: number): Promise<MetaTxnRow> {
    if (FINAL_STATUSES.has(row.status) || ms <= 0 || this.released) return row;
    const mine = this.perAddress.get(address) ?? 0;
    if (this.total >= this.limits.max || mine >= this.limits.perAddress) return row;
    this.total++;
    this.perAddress.set(address, mine + 1);
    const key = `${chainId}:${row.id}`;
    let w = this.watches.get(key);
    if (!w) {
      w = { row, waiters: 0, listeners: new Set() };
      this.watches.set(key, w);
      void this.follow(chainId, key, w);
    }
    w.waiters++;
    const watch = w;
    try {
      await new Promise<void>((resolve) => {
        const done = () => {
          clearTimeout(timer);
          watch.listeners.delete(check);
          this.held.delete(done);
          resolve();
        };
        const check = () => {
          if (FINAL_STATUSES.has(watch.row.status)) done();
        };
        const timer = setTimeout(done, ms);
        watch.listeners.add(check);
        this.held.add(done);
      });
      return watch.row;
    } finally {
      this.total--;
      const left = (this.perAddress.get(address) ?? 1) - 1;
      if (left > 0) this.perAddress.set(address, left);
      else this.perAddress.delete(address);
      if (--watch.waiters === 0 && this.watches.get(key) === watch) this.watches.delete(key);
    }
  }

  /** The one reader of a watched meta-transaction, while anyone waits on it. */
  private async follow(chainId: number, key: string, w: Watch) {
    while (this.watches.get(key) === w && !FINAL_STATUSES.has(w.row.status)) {
      await this.events.next(chainId, w.row.id, REREAD_MS);
      if (this.watches.get(key) !== w) return;
      try {
        w.row = (await this.read(chainId, w.row.id)) ?? w.row;
      } catch {
        // a failed read is retried at the next wake; waiters time out on their own
      }
      for (const l of [...w.listeners]) l();
    }
  }
}
