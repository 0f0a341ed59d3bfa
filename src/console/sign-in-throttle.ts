/**
 * Failed console sign-ins per client address: after `max` failures within `windowMs`, every sign-in
 * from that address (right token or not) waits until the oldest failure leaves the window, so guessing
 * tokens costs time. Per process: a fleet multiplies the allowance, which is still far from enough
 * to guess a 32-byte token.
 */
export class SignInThrottle {
  private readonly failures = new Map<string, number[]>();

  constructor(
    private readonly max = 10,
    private readonly windowMs = 60_000,
  ) {}

  private recent(ip: string, now: number): number[] {
    const kept = (this.failures.get(ip) ?? []).filter((t) => now - t < this.windowMs);
    if (kept.length) this.failures.set(ip, kept);
    else this.failures.delete(ip);
    return kept;
  }

  /** Seconds to wait before this address may try again, or 0. */
  retryAfterSec(ip: string, now = Date.now()): number {
    const r = this.recent(ip, now);
    return r.length < this.max ? 0 : Math.max(1, Math.ceil((r[0] + this.windowMs - now) / 1000));
  }

  fail(ip: string, now = Date.now()) {
    this.failures.set(ip, [...this.recent(ip, now), now]);
  }
}
