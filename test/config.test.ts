import { mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { ConfigError, loadConfig, parseConfig } from '../src/config/load.ts';

const tmp = mkdtempSync(join(tmpdir(), 'metarelay-cfg-'));
function file(content: string) {
  const p = join(tmp, `c${Math.random().toString(36).slice(2)}.json`);
  writeFileSync(p, content);
  return p;
}

describe('config', () => {
  it('fills safe defaults', () => {
    const c = parseConfig({});
    expect(c).toMatchObject({ port: 4000, host: '127.0.0.1', allowPrivateNetworks: false, chains: [], auth: { rpc: 'required', rest: 'optional' } });
  });

  it('is deeply frozen', () => {
    const c = parseConfig({ chains: [{ chainId: 1, name: 'mainnet', rpcUrls: ['https://rpc.example'] }] });
    expect(Object.isFrozen(c)).toBe(true);
    expect(Object.isFrozen(c.chains[0].rpcUrls)).toBe(true);
    expect(() => (c.chains as unknown as unknown[]).push({})).toThrow();
  });

  it('names the key and the problem when the config is wrong', () => {
    const bad = () => parseConfig({ port: 'eighty', chains: [{ chainId: 1, name: 'Main Net', rpcUrls: [] }], allowPrivateNetwork: true });
    expect(bad).toThrow(ConfigError);
    try {
      bad();
    } catch (err) {
      const msg = (err as Error).message;
      expect(msg).toContain('port:');
      expect(msg).toContain('chains[0].name');
      expect(msg).toContain('chains[0].rpcUrls');
      expect(msg).toContain('allowPrivateNetwork'); // an unknown key (typo) is refused, not ignored
    }
  });

  it('refuses duplicate chains', () => {
    expect(() =>
      parseConfig({
        chains: [
          { chainId: 1, name: 'a', rpcUrls: ['http://x.example'] },
          { chainId: 1, name: 'b', rpcUrls: ['http://y.example'] },
        ],
      }),
    ).toThrow(/duplicate chain "1"/);
  });

  it('reads a file, lets the environment override it and flags override both', () => {
    const p = file(JSON.stringify({ port: 5000, database: './data', logLevel: 'warn' }));
    const c = loadConfig({ file: p, env: { DATABASE_URL: 'postgres://u@h/db', PORT: '6000' } });
    expect(c.database).toBe('postgres://u@h/db');
    expect(c.port).toBe(6000);
    expect(c.logLevel).toBe('warn');
    expect(loadConfig({ file: p, env: { PORT: '6000' }, overrides: { port: 7000 } }).port).toBe(7000);
  });

  it('says clearly when the file is missing or not JSON', () => {
    expect(() => loadConfig({ file: join(tmp, 'missing.json'), env: {} })).toThrow(/cannot read config file/);
    expect(() => loadConfig({ file: file('{nope'), env: {} })).toThrow(/not valid JSON/);
    expect(() => loadConfig({ file: file('[]'), env: {} })).toThrow(/JSON object/);
  });

  it('reports a bad PORT from the environment against the port key', () => {
    expect(() => loadConfig({ env: { PORT: 'abc' } })).toThrow(/port:/);
  });
});
