import type { FastifyRequest } from 'fastify';
import { clientNetwork } from '../../util/client-net.ts';
import { CostShareFull, type CostShares, type ShareName } from '../../util/cost-shares.ts';
import { callerOf } from './access-pipeline.ts';
import { RpcError, type ErrorDef } from './errors.ts';

/** A domain's read shares as its HTTP methods spend them: the buckets, its client networks, and how it refuses. */
export interface ReadShareGate {
  shares: CostShares;
  /** The client network's prefixes (readShares.ipv4Prefix / ipv6Prefix). */
  net: { ipv4Prefix: number; ipv6Prefix: number };
  /** The domain's 429 (its catalog's RateLimited). */
  rateLimited: ErrorDef;
  /** Told the share of each refusal (the domain's `*_reads_refused_total`). */
  refused: (share: ShareName) => void;
}

/**
 * Runs a read in its caller's share (the Indexer's and Metadata's, http/indexer and http/metadata
 * read-shares.ts): the key's bucket, and inside it the caller's client network's (a backend's secret key
 * is held to its key's alone). The operator's back office is not a client of any key, and a read with no
 * weight (`cost()` undefined) is not charged. A full share is answered 429 with Retry-After, naming it.
 */
export async function runInReadShare<T>(g: ReadShareGate, req: FastifyRequest, cost: () => number | undefined, task: () => Promise<T>, opts: { hold?: boolean } = {}): Promise<T> {
  const caller = callerOf(req);
  if (caller.admin) return task();
  const units = cost();
  if (units === undefined) return task();
  const who = { key: caller.keyId !== null ? `k${caller.keyId}` : 'keyless', client: clientNetwork(req.ip, g.net), whole: caller.secretKey === true };
  try {
    return await g.shares.run(who, units, task, opts);
  } catch (err) {
    if (!(err instanceof CostShareFull)) throw err;
    g.refused(err.share);
    throw new RpcError(g.rateLimited, `${err.share}: ${err.message}`, { 'Retry-After': String(err.retryAfterSec) });
  }
}
