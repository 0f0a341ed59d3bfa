import { StreamSlots } from '../events/stream-slots.ts';

/**
 * The long-lived answers of one server: `GET /events` and the indexer's webrpc subscriptions. They
 * share one set of caps (webhooks.maxStreams, maxStreamsPerKey, maxStreamsPerAddress), so a client
 * cannot double its share by mixing the two, and they all end when the server closes (an open
 * stream would otherwise hold the close open forever).
 */
export class OpenStreams {
  readonly slots: StreamSlots;
  private readonly ends = new Set<() => void>();

  constructor(caps: { maxStreams: number; maxStreamsPerKey: number; maxStreamsPerAddress: number }) {
    this.slots = new StreamSlots({ total: caps.maxStreams, perKey: caps.maxStreamsPerKey, perAddress: caps.maxStreamsPerAddress });
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
