// The refreshes a collection edit asks for, off the request: an edit of a collection linked to many
// contracts used to queue a task per contract inside the request (seconds, with a hundred links). Now
// the edit is noted and answered; one background run at a time queues what has been noted since the
// last one, merged per contract (a second edit of the same contract before the run adds nothing).

import type { ContractLink } from './store.ts';

/** One contract's noted change: which of its tokens changed, or null for all (the collection itself). */
export interface Change {
  link: ContractLink;
  projectId: number;
  tokenIds: string[] | null;
}

export class ChangeFanout {
  private pending = new Map<string, { link: ContractLink; projectId: number; ids: Set<string> | null }>();
  private running: Promise<void> | null = null;

  constructor(
    /** Queues the refreshes of one batch (refresh-links.ts: per chain, one contract-info task for every contract). */
    private readonly apply: (batch: Change[]) => Promise<void>,
    private readonly onError: (err: unknown) => void,
  ) {}

  /** Notes a change (returns at once); a run starts if none is going. */
  add(links: ContractLink[], projectId: number, tokenIds: string[] | null): void {
    for (const link of links) {
      const key = `${link.chainId}:${link.contractAddress}:${projectId}`;
      const p = this.pending.get(key);
      if (!p) this.pending.set(key, { link, projectId, ids: tokenIds ? new Set(tokenIds) : null });
      else if (p.ids && tokenIds) for (const id of tokenIds) p.ids.add(id);
      else p.ids = null;
    }
    if (!this.running && this.pending.size) this.running = this.drain();
  }

  private async drain(): Promise<void> {
    while (this.pending.size) {
      const batch = [...this.pending.values()].map((p) => ({ link: p.link, projectId: p.projectId, tokenIds: p.ids && [...p.ids] }));
      this.pending.clear();
      try {
        await this.apply(batch);
      } catch (err) {
        this.onError(err);
      }
    }
    this.running = null;
  }

  /** Resolves once nothing is noted or running (close waits for it before the database goes). */
  async idle(): Promise<void> {
    while (this.running) await this.running;
  }
}
