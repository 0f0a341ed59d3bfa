import type { Logger } from '../../telemetry/logger.ts';
import type { Metrics } from '../../telemetry/metrics.ts';
import { ContractPostings, type PostingsView } from './postings.ts';
import type { IndexVersion, PostingsStore } from './postings-store.ts';

/**
 * A contract with at most this many tokens is loaded while its first search waits (tens of
 * milliseconds); a larger one loads in the background (2 s for 100 000 tokens on PostgreSQL) and
 * its searches go to SQL until it is held.
 */
export const INLINE_LOAD_TOKENS = 5_000;

/**
 * How long a search waits for a catch-up or an inline load before it answers from SQL instead (the
 * work goes on): a holder far behind, e.g. while a collection is re-read, never delays a search by
 * more than this.
 */
export const WAIT_MS = 200;

export interface PostingsCacheDeps {
  store: PostingsStore;
  log: Logger;
  /** Bytes of posting lists a process holds at most (metadata.searchMemoryMB); 0 holds none. */
  budgetBytes: number;
  metrics?: Pick<Metrics, 'searchPostings'>;
  /** Contracts up to this many tokens load while their first search waits (INLINE_LOAD_TOKENS). */
  inlineLoadTokens?: number;
}

/**
 * The posting lists this process holds, per contract, each kept at the database's version: every
 * search reads the contract's version, and a holder behind it re-reads the tokens changed since
 * (migration 0029) before answering, so a search never answers from older data than SQL would.
 * Contracts are held least recently searched first out when over the memory budget.
 */
export class PostingsCache {
  /** Held contracts, least recently searched first (Map order). */
  private readonly held = new Map<string, ContractPostings>();
  private readonly bytes = new Map<string, number>();
  private readonly jobs = new Map<string, Promise<void>>();
  /** Contracts found bigger than the budget, with their token count then: not loaded again unless they shrink. */
  private readonly tooBig = new Map<string, number>();
  private total = 0;

  constructor(private readonly d: PostingsCacheDeps) {}

  /** The database side of the lists (what a search reads besides them: rows, word postings). */
  get store(): PostingsStore {
    return this.d.store;
  }

  /** The contract's posting lists at the database's current version, or null (the search goes to SQL). */
  async view(chainId: number, contract: string): Promise<PostingsView | null> {
    if (this.d.budgetBytes <= 0) return null;
    const key = `${chainId}:${contract}`;
    const v = await this.d.store.version(chainId, contract);
    if (!v) {
      this.drop(key);
      return null;
    }
    for (;;) {
      let ix = this.held.get(key);
      // A holder older than the changes kept cannot catch up: it is reloaded like a first load.
      if (ix && ix.version < v.floor && !this.jobs.has(key)) {
        this.drop(key);
        ix = undefined;
      }
      if (ix && ix.version >= v.version) {
        this.held.delete(key);
        this.held.set(key, ix);
        return ix.view();
      }
      if (!ix && (this.tooBig.get(key) ?? Infinity) <= v.tokens) return null;
      let job = this.jobs.get(key);
      if (!job) {
        job = this.update(key, chainId, contract, v, ix ?? null).finally(() => this.jobs.delete(key));
        this.jobs.set(key, job);
      }
      // A holder catching up, or a small contract, is waited for; a large first load is not.
      if (!ix && v.tokens > (this.d.inlineLoadTokens ?? INLINE_LOAD_TOKENS)) {
        job.catch(() => {});
        return null;
      }
      job.catch(() => {});
      let timer: NodeJS.Timeout | undefined;
      const done = await Promise.race([
        job.then(
          () => true,
          () => false,
        ),
        new Promise<false>((r) => (timer = setTimeout(() => r(false), WAIT_MS))),
      ]).finally(() => clearTimeout(timer));
      if (!done || !this.held.has(key)) return null;
    }
  }

  /** What is held (also on /metrics). */
  stats(): { contracts: number; tokens: number; bytes: number } {
    let tokens = 0;
    for (const ix of this.held.values()) tokens += ix.size;
    return { contracts: this.held.size, tokens, bytes: this.total };
  }

  private report(): void {
    const g = this.d.metrics?.searchPostings;
    if (!g) return;
    const s = this.stats();
    g.set({ measure: 'contracts' }, s.contracts);
    g.set({ measure: 'tokens' }, s.tokens);
    g.set({ measure: 'bytes' }, s.bytes);
  }

  private async update(key: string, chainId: number, contract: string, v: IndexVersion, ix: ContractPostings | null): Promise<void> {
    try {
      const changed = ix ? await this.d.store.changedSince(chainId, contract, ix.version, v.version) : null;
      if (ix && changed) {
        ix.apply(changed, await this.d.store.tokens(chainId, contract, changed));
        ix.version = v.version;
      } else {
        // Read after the version: what is loaded is at least that version (a change it already holds is re-read later, harmlessly).
        const fresh = new ContractPostings(v.version);
        const started = performance.now();
        fresh.load(await this.d.store.tokens(chainId, contract, null));
        this.d.log.info({ chainId, contract, tokens: fresh.size, ms: Math.round(performance.now() - started) }, 'token search: posting lists loaded');
        ix = fresh;
      }
      this.hold(key, ix, v.tokens);
    } catch (err) {
      this.drop(key);
      this.d.log.warn({ chainId, contract, err }, 'token search: posting lists not loaded; searches go to SQL');
      throw err;
    }
  }

  /** `estimate`: the version's token estimate, which the next search compares with to decide whether to try again. */
  private hold(key: string, ix: ContractPostings, estimate: number): void {
    this.drop(key);
    const size = ix.bytes();
    if (size > this.d.budgetBytes) {
      this.tooBig.set(key, estimate);
      this.d.log.info({ key, bytes: size, budget: this.d.budgetBytes }, 'token search: contract over the memory budget; its searches go to SQL');
      return;
    }
    this.tooBig.delete(key);
    this.held.set(key, ix);
    this.bytes.set(key, size);
    this.total += size;
    for (const [k] of this.held) {
      if (this.total <= this.d.budgetBytes) break;
      this.drop(k);
    }
    this.report();
  }

  private drop(key: string): void {
    this.held.delete(key);
    this.total -= this.bytes.get(key) ?? 0;
    this.bytes.delete(key);
    this.report();
  }
}
