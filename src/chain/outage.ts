import { causes, findCause, MetarelayError } from '../util/error.ts';
import type { ChainClient } from './client.ts';
import { CallBudgetError } from './call-budget.ts';
import { normalUrl as normal } from './health.ts';

/** A call that failed because a chain's node could not be reached (or refused us with 429). */
export interface ChainOutage {
  chain: string;
  chainId: number;
  cause: string;
  rateLimited: boolean;
  retryAfterS: number;
}

/**
 * A read that needed the node, found its chain down (its health says so) and has nothing stored to
 * answer with: mapped to the same 503 as a transport failure. Thrown where the failure itself would
 * otherwise be swallowed (a bounded wait that answers NOT_AVAILABLE) or has not come yet (a hung node).
 */
export class ChainUnreachableError extends MetarelayError {
  override readonly name = 'ChainUnreachableError';
  constructor(readonly chainId: number) {
    super(`chain ${chainId}: its node cannot be reached`, { kind: 'unreachable', retryable: true, docsPath: 'production.md#when-a-chains-node-is-down' });
  }
}

interface TransportError {
  name?: string;
  url?: string;
  status?: number;
  shortMessage?: string;
  cause?: unknown;
}

// viem's transport failures: the node did not answer (refused, reset, timed out) or answered an HTTP
// error. A JSON-RPC error (a revert, a bad nonce) is an answer, not an outage, and is not matched.
const TRANSPORT = new Set(['HttpRequestError', 'TimeoutError']);

/** The outage behind `err`, if it is one: found by the failing URL among the chains' RPC URLs. */
export function chainOutageOf(err: unknown, chains: Iterable<ChainClient>): ChainOutage | undefined {
  // A call that got no slot of a rate-limited node's budget in time, wherever viem wrapped it.
  const b = findCause(err, (e) => e instanceof CallBudgetError) as CallBudgetError | undefined;
  if (b) {
    const c = [...chains].find((x) => x.chainId === b.chainId);
    return c && { chain: c.name, chainId: c.chainId, cause: b.message, rateLimited: true, retryAfterS: b.retryAfterS };
  }
  for (const e of causes(err) as Generator<TransportError>) {
    if (e instanceof ChainUnreachableError) {
      const id = e.chainId;
      const c = [...chains].find((x) => x.chainId === id);
      return c && outageOf(c, false, undefined);
    }
    if (!e.name || !TRANSPORT.has(e.name) || !e.url) continue;
    const url = normal(e.url);
    for (const c of chains) {
      if (!c.rpcUrls.some((u) => normal(u) === url)) continue;
      return outageOf(c, e.status === 429, e.shortMessage ?? e.name);
    }
    return undefined;
  }
  return undefined;
}

/** The outage as the chain's health describes it (its cause in the transport's words), else as the error does. */
function outageOf(c: ChainClient, status429: boolean, fallback: string | undefined): ChainOutage {
  const st = c.health.state();
  const rateLimited = status429 || st.rateLimited;
  return {
    chain: c.name,
    chainId: c.chainId,
    cause: st.cause ?? (rateLimited ? 'rate-limited by the node (HTTP 429)' : (fallback ?? 'unreachable')),
    rateLimited,
    retryAfterS: c.health.retryAfterSeconds,
  };
}
