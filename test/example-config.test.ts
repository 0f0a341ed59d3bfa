import { describe, expect, it } from 'vitest';
import { loadConfig } from '../src/config/load.ts';

describe('metarelay.example.json', () => {
  it('is a valid config, as the README promises', () => {
    const c = loadConfig({ file: 'metarelay.example.json', env: {} });
    expect(c.chains.map((x) => x.name)).toEqual(['mainnet', 'polygon']);
    expect(c.allowPrivateNetworks).toBe(false);
  });
});
