// The stream caps' shares as a unit (issue 54): a client network's part of a key's streams is counted by
// its /24 or /48 (as the HTTP layer hands addresses: IPv4 exact, IPv6 as its /64), and a freed slot
// returns to the network that held it.
import { describe, expect, it } from 'vitest';
import { StreamSlots } from '../src/events/stream-slots.ts';

const slots = () => new StreamSlots({ total: 100, perKey: 20, perAddress: 10, perKeyClient: 2, ipv4Prefix: 24, ipv6Prefix: 48 });

describe('StreamSlots', () => {
  it("holds each client network of a key to its share, whichever of the network's addresses asks", () => {
    const s = slots();
    expect(s.take(1, '198.51.100.7').ok).toBe(true);
    const second = s.take(1, '198.51.100.200');
    expect(second.ok).toBe(true);
    const third = s.take(1, '198.51.100.9');
    expect(third).toMatchObject({ ok: false, share: 'keyClient' });
    expect(third.ok ? '' : third.reason).toMatch(/client network 198\.51\.100\.0\/24 already has 2 event streams open with this access key/);
    // Another network, another key, or no key: their own counts.
    expect(s.take(1, '198.51.101.7').ok).toBe(true);
    expect(s.take(2, '198.51.100.9').ok).toBe(true);
    expect(s.take(null, '198.51.100.9').ok).toBe(true);
    // A slot given back is the network's again.
    if (second.ok) second.release();
    expect(s.take(1, '198.51.100.9').ok).toBe(true);
    expect(s.reading()).toMatchObject({ open: 5, keyClientsFull: 1, maxPerKeyClient: 2 });
  });

  it('counts IPv6 callers by their /48: two /64s of one /48 share its part', () => {
    const s = slots();
    expect(s.take(1, '2001:db8:1:1::/64').ok).toBe(true);
    expect(s.take(1, '2001:db8:1:2::/64').ok).toBe(true);
    expect(s.take(1, '2001:db8:1:3::/64')).toMatchObject({ ok: false, share: 'keyClient', reason: expect.stringMatching(/client network 2001:db8:1::\/48/) });
    expect(s.take(1, '2001:db8:2:1::/64').ok).toBe(true);
  });
});
