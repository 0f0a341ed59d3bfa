// Who may fetch token documents, and how much (issue 54): the process's fetch slots shared fairly by
// caller and by origin host (util/fair-gate.ts), and keyless callers charged per unseen token fetched.

import type { AppConfig } from '../../config/schema.ts';
import { FairGate } from '../../util/fair-gate.ts';
import type { FleetSize } from '../../util/fleet-share.ts';
import { IpBuckets } from '../../util/ip-buckets.ts';
import { GATEWAY_SHARE } from '../fetch/uri.ts';

/** Who a read is for: `queue` is `k<key id>` for a key, `anon:<client address>` without one. */
export type FetchCaller = { queue: string; keyless: boolean };

/** A read refused because a share is full: answered 429 with Retry-After, naming the share. */
export class FetchShareFull extends Error {
  constructor(
    readonly share: 'keylessFetches' | 'callerQueue',
    message: string,
    readonly retryAfterSec: number,
  ) {
    super(message);
  }
}

export class FetchShares {
  readonly gate: FairGate;
  private readonly keyless: IpBuckets;

  /** `fleet`: the API processes sharing the keyless rates (util/fleet-share.ts). */
  constructor(
    private readonly m: AppConfig['metadata'],
    fleet?: FleetSize,
  ) {
    this.gate = new FairGate({
      limit: m.fetchConcurrency,
      perHost: m.perHostConcurrency,
      perHostMax: m.perHostMaxConcurrency ?? m.fetchConcurrency,
      fastMs: m.fastHostMs,
      keylessLimit: m.keylessConcurrency,
      keylessHostRatePerSec: m.keylessHostRatePerSec,
      keylessHostBurst: m.keylessHostBurst,
      maxWaiting: m.maxWaitingPerCaller,
      hostLimit: (host) => (host === GATEWAY_SHARE ? (m.gatewayConcurrency ?? m.fetchConcurrency) : undefined),
      fleet,
    });
    this.keyless = new IpBuckets(m.keylessFetchesPerSec, m.keylessFetchBurst, fleet);
  }

  /** Admits `n` documents to fetch for `caller`, or throws FetchShareFull (nothing is charged then). */
  admit(caller: FetchCaller, n: number): void {
    if (n <= 0) return;
    if (!this.gate.hasRoom(caller.queue, n)) {
      throw new FetchShareFull('callerQueue', `too many token documents waiting to be fetched for this caller (at most ${this.m.maxWaitingPerCaller}); retry later`, 1);
    }
    if (!caller.keyless) return;
    const took = this.keyless.take(caller.queue, Date.now(), n);
    if (!took.ok) {
      throw new FetchShareFull(
        'keylessFetches',
        `keyless share of token fetches used up for this address (${this.m.keylessFetchesPerSec} unseen tokens/s, burst ${this.m.keylessFetchBurst}); retry in ${took.retryAfterSec}s or send an access key`,
        took.retryAfterSec,
      );
    }
  }
}
