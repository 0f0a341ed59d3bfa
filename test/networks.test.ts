import { describe, expect, it } from 'vitest';
import { KNOWN_NETWORKS, lookupKnownNetwork } from '../src/chain/networks.ts';
import { NetworkRegistry } from '../src/chain/registry.ts';

describe('network registry', () => {
  const reg = new NetworkRegistry([
    { chainId: 137, name: 'polygon' },
    { chainId: 31337, name: 'anvil' },
  ]);

  it('resolves a configured chain by number, name, hex id, alias and any case', () => {
    for (const input of ['137', 'polygon', 'POLYGON', '0x89', 'matic', ' 137 ']) {
      const r = reg.lookup(input);
      expect(r.ok, input).toBe(true);
      if (r.ok) expect(r.chain.chainId).toBe(137);
    }
  });

  it('says a known but unconfigured chain is not configured, naming it', () => {
    const r = reg.lookup('mainnet');
    expect(r).toMatchObject({ ok: false, reason: 'not-configured' });
    if (!r.ok) expect(r.message).toContain('mainnet (1)');
    expect(reg.lookup('1')).toMatchObject({ ok: false, reason: 'not-configured' });
  });

  it('says an unknown chain is unknown', () => {
    expect(reg.lookup('narnia')).toMatchObject({ ok: false, reason: 'unknown' });
    expect(reg.lookup('')).toMatchObject({ ok: false, reason: 'unknown' });
  });

  it('knows the well-known networks with unique ids and names', () => {
    for (const name of ['mainnet', 'sepolia', 'polygon', 'amoy', 'arbitrum', 'arbitrum-nova', 'optimism', 'base', 'base-sepolia', 'bsc', 'avalanche', 'gnosis', 'zksync', 'linea', 'scroll', 'blast']) {
      expect(lookupKnownNetwork(name), name).toBeDefined();
    }
    expect(new Set(KNOWN_NETWORKS.map((n) => n.chainId)).size).toBe(KNOWN_NETWORKS.length);
    expect(new Set(KNOWN_NETWORKS.map((n) => n.name)).size).toBe(KNOWN_NETWORKS.length);
    expect(lookupKnownNetwork('42161')?.name).toBe('arbitrum');
  });
});
