import { innermost } from '../util/error.ts';
import type { Logger } from '../telemetry/logger.ts';
import { CallBudgetError, retryAfterOf } from './call-budget.ts';

/** How a call that got no answer in time is described (describeFailure). */
const NO_ANSWER_WITHIN = 'no answer within';

/** What an operator (and /ready, and Health) sees of one chain's node. */
export interface ChainState {
  name: string;
  chainId: number;
  ok: boolean;
  /** The last block number the node told us, kept through an outage. */
  head: number | null;
  headAt: string | null;
  /** When the current outage began (the first failed call after a good one). */
  downSince: string | null;
  /** Why, in one line: the transport's own words (refused, timed out, HTTP 429 …). */
  cause: string | null;
  /** The node (or provider) asked us to slow down: a 429, with its Retry-After if it gave one. */
  rateLimited: boolean;
}

/** Seconds a client is told to wait before retrying against a chain that is down or rate-limited. */
const DEFAULT_RETRY_AFTER_S = 5;

/**
 * The node's state as every call through the transport sees it: each answer or failure is recorded
 * here, so an outage is known (and logged) once, with its cause, however many requests meet it.
 */
export class ChainHealth {
  private head: number | null = null;
  private headAt: Date | null = null;
  private downSince: Date | null = null;
  private cause: string | null = null;
  private rateLimited = false;
  private retryAfterS = DEFAULT_RETRY_AFTER_S;
  /** Each RPC URL's last failure, cleared by its next answer; a URL not yet tried counts as up. */
  private readonly failing = new Map<string, string>();

  constructor(
    readonly chainId: number,
    readonly name: string,
    private readonly log?: Logger,
    /** The chain's RPC URLs: with a fallback, the chain is down only when every one of them fails. */
    private readonly urls: readonly string[] = [],
  ) {}

  get ok(): boolean {
    return this.downSince === null;
  }

  /** How long a client should wait before trying again (the provider's own Retry-After when it sent one). */
  get retryAfterSeconds(): number {
    return this.retryAfterS;
  }

  reached(url?: string): void {
    if (url !== undefined) this.failing.delete(normalUrl(url));
    if (this.downSince === null) return;
    this.log?.info({ chain: this.name, chainId: this.chainId, downMs: Date.now() - this.downSince.getTime(), cause: this.cause }, 'chain node reachable again');
    this.downSince = null;
    this.cause = null;
    this.rateLimited = false;
    this.retryAfterS = DEFAULT_RETRY_AFTER_S;
  }

  failed(cause: string, opts: { rateLimited?: boolean; retryAfterS?: number; url?: string } = {}): void {
    if (opts.url !== undefined) this.failing.set(normalUrl(opts.url), cause);
    // One URL failing while a fallback URL still answers is no outage of the chain.
    if (opts.url !== undefined && this.urls.some((u) => !this.failing.has(normalUrl(u)))) return;
    // A call that timed out while the node rate-limits us (no answer since its 429s) is that same spell,
    // not a node gone: a request in flight meets the caller's timeout on a loaded machine. It keeps the
    // spell's cause, so callers are told to slow down, not that the node cannot be reached.
    if (this.rateLimited && !opts.rateLimited && cause.startsWith(NO_ANSWER_WITHIN)) return;
    this.cause = cause;
    this.rateLimited = opts.rateLimited ?? false;
    this.retryAfterS = opts.retryAfterS ?? DEFAULT_RETRY_AFTER_S;
    if (this.downSince !== null) return;
    this.downSince = new Date();
    // Once per outage: the requests that meet it are answered 503 without a line each.
    this.log?.warn({ chain: this.name, chainId: this.chainId, cause, lastHead: this.head }, 'chain node unreachable');
  }

  sawHead(block: bigint | number): void {
    this.head = Number(block);
    this.headAt = new Date();
  }

  state(): ChainState {
    return {
      name: this.name,
      chainId: this.chainId,
      ok: this.ok,
      head: this.head,
      headAt: this.headAt?.toISOString() ?? null,
      downSince: this.downSince?.toISOString() ?? null,
      cause: this.cause,
      rateLimited: this.rateLimited,
    };
  }
}

/** A URL as fetch reports it (`http://host:port` gains its `/`). */
export function normalUrl(url: string): string {
  try {
    return new URL(url).href;
  } catch {
    return url;
  }
}

/** One line for a failed fetch: the innermost cause is the one that names the fault (ECONNREFUSED …). */
function describeFailure(err: unknown, timeoutMs: number): string {
  const name = (err as { name?: unknown } | undefined)?.name;
  if (name === 'AbortError' || name === 'TimeoutError') return `${NO_ANSWER_WITHIN} ${timeoutMs} ms`;
  const e = innermost(err) as { message?: string; code?: string } | undefined;
  return (e?.code && !e.message?.includes(e.code) ? `${e.code} ${e.message ?? ''}` : (e?.message ?? String(err))).split('\n')[0].trim();
}

type Fetch = (input: string | URL | Request, init?: RequestInit) => Promise<Response>;

/** A fetch that tells `health` of every answer and failure; it answers and fails exactly as `base` does. */
export function observedFetch(base: Fetch, health: ChainHealth, timeoutMs: number): Fetch {
  return async (input, init) => {
    const url = input instanceof Request ? input.url : String(input);
    let res: Response;
    try {
      res = await base(input, init);
    } catch (err) {
      // No slot of the node's budget came in time (its 429s, waited out as long as the call could wait):
      // rate-limited, told as a 429 was, until the node's next answer.
      if (err instanceof CallBudgetError) health.failed('rate-limited by the node (HTTP 429)', { url, rateLimited: true, retryAfterS: err.retryAfterS });
      else health.failed(describeFailure(err, timeoutMs), { url });
      throw err;
    }
    if (res.status === 429) health.failed('rate-limited by the node (HTTP 429)', { url, rateLimited: true, retryAfterS: retryAfterOf(res.headers.get('retry-after')) });
    else if (res.status >= 500) health.failed(`the node answered HTTP ${res.status}`, { url });
    else health.reached(url);
    return res;
  };
}
