import { clientNetwork } from '../util/client-net.ts';

/** The caps on open `GET /events` and webrpc streams (config webhooks.maxStreams, maxStreamsPerKey, maxStreamsPerAddress, streamShares). */
export interface StreamCaps {
  total: number;
  perKey: number;
  perAddress: number;
  /** Streams one client network may hold of one key's perKey (streamShares.perKeyClientPercent, rounded up). */
  perKeyClient: number;
  /** What a client network is (streamShares.ipv4Prefix / ipv6Prefix). */
  ipv4Prefix: number;
  ipv6Prefix: number;
}

/** Which cap refused a stream: the process's, the key's, a client network's share of the key's, an address's. */
export type StreamShare = 'server' | 'key' | 'keyClient' | 'address';

/**
 * Counts open event streams per access key, per client network of each key, per client address and in
 * the process, so that one key or one address cannot hold thousands of them (each is a socket and a
 * place in every fan-out). A key ships in browser apps and is anyone's to use: without the per-network
 * share, two addresses held all of a dapp's streams and locked every other user out (issue 54); with
 * it, a client network that fills its share is refused alone.
 */
export class StreamSlots {
  private total = 0;
  private readonly byKey = new Map<number, number>();
  private readonly byKeyClient = new Map<string, number>();
  private readonly byAddress = new Map<string, number>();

  constructor(
    private readonly caps: StreamCaps,
    private readonly onRefused?: (share: StreamShare) => void,
  ) {}

  /** For /metrics: streams open, keys at their cap, client networks at their share of a key, and the caps. */
  reading(): Record<string, number> {
    let keysFull = 0;
    let keyClientsFull = 0;
    for (const n of this.byKey.values()) if (n >= this.caps.perKey) keysFull++;
    for (const n of this.byKeyClient.values()) if (n >= this.caps.perKeyClient) keyClientsFull++;
    return { open: this.total, keysFull, keyClientsFull, maxStreams: this.caps.total, maxPerKey: this.caps.perKey, maxPerKeyClient: this.caps.perKeyClient };
  }

  /** A slot and the function that gives it back (once), or why there is none. */
  take(keyId: number | null, address: string): { ok: true; release: () => void } | { ok: false; reason: string; share: StreamShare } {
    const refuse = (share: StreamShare, reason: string) => {
      this.onRefused?.(share);
      return { ok: false as const, reason, share };
    };
    if (this.total >= this.caps.total) return refuse('server', `the server already has ${this.caps.total} event streams open`);
    if (keyId !== null && (this.byKey.get(keyId) ?? 0) >= this.caps.perKey) return refuse('key', `this access key already has ${this.caps.perKey} event streams open`);
    const net = clientNetwork(address, this.caps) ?? address;
    const keyClient = keyId === null ? null : `${keyId} ${net}`;
    if (keyClient !== null && (this.byKeyClient.get(keyClient) ?? 0) >= this.caps.perKeyClient) {
      return refuse(
        'keyClient',
        `client network ${net} already has ${this.caps.perKeyClient} event streams open with this access key (its share of the key's ${this.caps.perKey}; webhooks.streamShares.perKeyClientPercent)`,
      );
    }
    if ((this.byAddress.get(address) ?? 0) >= this.caps.perAddress) return refuse('address', `client address ${address} already has ${this.caps.perAddress} event streams open`);
    this.total++;
    // A caller without a key (a method open to anyone) is held by its address alone.
    if (keyId !== null) bump(this.byKey, keyId, 1);
    if (keyClient !== null) bump(this.byKeyClient, keyClient, 1);
    bump(this.byAddress, address, 1);
    let held = true;
    return {
      ok: true,
      release: () => {
        if (!held) return;
        held = false;
        this.total--;
        if (keyId !== null) bump(this.byKey, keyId, -1);
        if (keyClient !== null) bump(this.byKeyClient, keyClient, -1);
        bump(this.byAddress, address, -1);
      },
    };
  }
}

function bump<K>(m: Map<K, number>, k: K, by: number) {
  const n = (m.get(k) ?? 0) + by;
  if (n === 0) m.delete(k);
  else m.set(k, n);
}
