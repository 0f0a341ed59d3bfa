/** The caps on open `GET /events` streams (config webhooks.maxStreams, maxStreamsPerKey, maxStreamsPerAddress). */
export interface StreamCaps {
  total: number;
  perKey: number;
  perAddress: number;
}

/**
 * Counts open event streams per access key, per client address and in the process, so that one key or
 * one address cannot hold thousands of them (each is a socket and a place in every fan-out).
 */
export class StreamSlots {
  private total = 0;
  private readonly byKey = new Map<number, number>();
  private readonly byAddress = new Map<string, number>();

  constructor(private readonly caps: StreamCaps) {}

  /** A slot and the function that gives it back (once), or why there is none. */
  take(keyId: number | null, address: string): { ok: true; release: () => void } | { ok: false; reason: string } {
    if (this.total >= this.caps.total) return { ok: false, reason: `the server already has ${this.caps.total} event streams open` };
    if (keyId !== null && (this.byKey.get(keyId) ?? 0) >= this.caps.perKey) return { ok: false, reason: `this access key already has ${this.caps.perKey} event streams open` };
    if ((this.byAddress.get(address) ?? 0) >= this.caps.perAddress) return { ok: false, reason: `client address ${address} already has ${this.caps.perAddress} event streams open` };
    this.total++;
    // A caller without a key (a method open to anyone) is held by its address alone.
    if (keyId !== null) bump(this.byKey, keyId, 1);
    bump(this.byAddress, address, 1);
    let held = true;
    return {
      ok: true,
      release: () => {
        if (!held) return;
        held = false;
        this.total--;
        if (keyId !== null) bump(this.byKey, keyId, -1);
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
