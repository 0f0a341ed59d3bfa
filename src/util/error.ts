/**
 * The error base and the one walk over an error's causes. viem (BaseError) and the node wrap a failure
 * several times (ContractFunctionExecutionError → CallExecutionError → HttpRequestError → the fetch's
 * TypeError → the socket's error): every classifier of a failed call looks down that chain, and does it
 * with `causes()`, so each one stops at the same depth and skips the same non-objects. The node's
 * classifiers are in chain/node-errors.ts; an error in one line for an operator is util/cause.ts's.
 */

/** How deep a cause chain is walked: viem's deepest is five or six; a cycle must end. */
const MAX_DEPTH = 8;

/** `err` and its causes, outermost first: objects only, at most `max` of them (a cycle ends there). */
export function* causes(err: unknown, max = MAX_DEPTH): Generator<Record<string, unknown>> {
  let e = err;
  for (let depth = 0; e && typeof e === 'object' && depth < max; depth++) {
    yield e as Record<string, unknown>;
    e = (e as { cause?: unknown }).cause;
  }
}

/** The first of `err` and its causes that `test` accepts. */
export function findCause(err: unknown, test: (e: Record<string, unknown>) => boolean, max = MAX_DEPTH): Record<string, unknown> | undefined {
  for (const e of causes(err, max)) if (test(e)) return e;
  return undefined;
}

/** The innermost of `err` and its causes (at most `max` deep): the one that names the fault (ECONNREFUSED …). */
export function innermost(err: unknown, max = MAX_DEPTH): Record<string, unknown> | undefined {
  let last: Record<string, unknown> | undefined;
  for (const e of causes(err, max)) last = e;
  return last;
}

/**
 * Everything `err` and its causes say, outermost first, ` | ` apart: viem's short message, what the node
 * said (`details`), the message, and an HTTP status. What the classifiers of a failed call match their
 * words against (a node's wording may sit at any depth), and what a failure is recorded as. A thrown
 * non-object, or objects that say nothing, give `String(err)`.
 */
export function errorText(err: unknown, max = MAX_DEPTH): string {
  const parts: string[] = [];
  for (const e of causes(err, max)) {
    for (const said of [e.shortMessage, e.details, e.message]) if (typeof said === 'string' && said) parts.push(said);
    if (typeof e.status === 'number') parts.push(`HTTP ${e.status}`);
  }
  return parts.length ? parts.join(' | ') : String(err);
}

export interface MetarelayErrorOptions {
  cause?: unknown;
  /** What went wrong, in one word a caller can branch on (`rate-limited`, `unreachable`, `no-state`). */
  kind?: string;
  /** Asking again later may succeed (a node behind, a rate limit, an outage), as opposed to a refusal. */
  retryable?: boolean;
  /** The page under docs/ that explains it (and the setting that governs it), e.g. `chains.md#rate-limits`. */
  docsPath?: string;
}

/**
 * metarelay's own errors, in viem's BaseError manner: a message, the cause it wraps, and what a caller
 * needs to decide (kind, retryable) without matching on the message. The message is not changed by
 * the fields (callers and tests read it as it was).
 */
export class MetarelayError extends Error {
  override name = 'MetarelayError';
  readonly kind: string | undefined;
  readonly retryable: boolean;
  readonly docsPath: string | undefined;

  constructor(message: string, opts: MetarelayErrorOptions = {}) {
    super(message, opts.cause === undefined ? undefined : { cause: opts.cause });
    this.kind = opts.kind;
    this.retryable = opts.retryable ?? false;
    this.docsPath = opts.docsPath;
  }

  /** This error and its causes, outermost first. */
  causes(): Generator<Record<string, unknown>> {
    return causes(this);
  }
}
