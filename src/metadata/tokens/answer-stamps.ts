// Whether an answer assembled earlier is still current: per contract, a stamp replaced whenever one
// of its tokens is re-resolved in this process.

/**
 * Stamps come from one counter and are never reused: a stamp dropped to bound the map reads as
 * "changed", never as "unchanged".
 */
export class ContractStamps {
  private readonly stamps = new Map<string, number>();
  private seq = 0;

  /** At most this many contracts are remembered (the oldest stamped go first). */
  constructor(private readonly max: number) {}

  of(scope: string): number {
    let st = this.stamps.get(scope);
    if (st === undefined) {
      st = ++this.seq;
      this.stamps.set(scope, st);
      this.trim();
    }
    return st;
  }

  restamp(scope: string): void {
    this.stamps.delete(scope);
    this.stamps.set(scope, ++this.seq);
    this.trim();
  }

  /** Built apart from the answer so that a cached answer's check holds on to nothing of the request. */
  currentCheck(scope: string, stamp: number): () => boolean {
    return () => this.stamps.get(scope) === stamp;
  }

  private trim(): void {
    while (this.stamps.size > this.max) this.stamps.delete(this.stamps.keys().next().value!);
  }
}
