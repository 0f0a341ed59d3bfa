import { StreamSlots, type StreamShare } from '../../events/stream-slots.ts';

/** The webhooks config the stream caps come from. */
export interface StreamConfig {
  maxStreams: number;
  maxStreamsPerKey: number;
  maxStreamsPerAddress: number;
  streamShares: { perKeyClientPercent: number; ipv4Prefix: number; ipv6Prefix: number };
}

/**
 * The long-lived answers of one server: `GET /events` and the indexer's webrpc subscriptions. They
 * share one set of caps (webhooks.maxStreams, maxStreamsPerKey, maxStreamsPerAddress and each client
 * network's share of a key's, streamShares.perKeyClientPercent), so a client cannot double its share by
 * mixing the two, and they all end when the server closes (an open stream would otherwise hold the
 * close open forever).
 */
export class OpenStreams {
  readonly slots: StreamSlots;
  private readonly ends = new Set<() => void>();

  constructor(c: StreamConfig, onRefused?: (share: StreamShare) => void) {
    const sh = c.streamShares;
    this.slots = new StreamSlots(
      {
        total: c.maxStreams,
        perKey: c.maxStreamsPerKey,
        perAddress: c.maxStreamsPerAddress,
        perKeyClient: Math.max(1, Math.ceil((c.maxStreamsPerKey * sh.perKeyClientPercent) / 100)),
        ipv4Prefix: sh.ipv4Prefix,
        ipv6Prefix: sh.ipv6Prefix,
      },
      onRefused,
    );
  }

  /** Registers a stream's end; the returned function forgets it (call it when the stream ends). */
  add(end: () => void): () => void {
    this.ends.add(end);
    return () => this.ends.delete(end);
  }

  closeAll() {
    for (const end of [...this.ends]) end();
  }
}
