import { mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { privateKeyToAccount } from 'viem/accounts';
import { describe, expect, it } from 'vitest';
import { ConfigError, loadConfig } from '../src/config/load.ts';
import { maskUrl } from '../src/config/mask.ts';
import { runCli } from './support/cli.ts';

const dir = mkdtempSync(join(tmpdir(), 'metarelay-secrets-'));
const put = (name: string, content: string) => {
  const p = join(dir, name);
  writeFileSync(p, content);
  return p;
};
const K1 = `0x${'11'.repeat(32)}`;
const K2 = `0x${'22'.repeat(32)}`;
const K3 = `0x${'33'.repeat(32)}`;
const MNEMONIC = 'test test test test test test test test test test test junk';
const QUOTE = 'q'.repeat(40) + 'QUOTESECRET';
const ADMIN = 'admin-token-from-a-mounted-file-XYZ';
const DB_URL = 'postgres://metarelay:Pa55w0rdSecret@db.internal:5432/metarelay';

// The config file itself holds no secret: only where they are.
const cfgFile = put(
  'metarelay.json',
  JSON.stringify({
    chains: [
      { chainId: 31337, name: 'local-one', rpcUrls: ['https://eth-mainnet.g.alchemy.com/v2/AbCdEf0123456789xyzKEY'], relayer: { senderKeysFile: 'senders.txt' } },
      { chainId: 5, name: 'second', rpcUrls: ['http://127.0.0.1:1'], relayer: { senderMnemonicFile: 'mnemonic.txt', senderCount: 2 } },
    ],
    admin: { tokensFile: 'admin-tokens.txt' },
  }),
);
put('senders.txt', `# hot wallets\n${K1}\n\n${K2}\n`);
put('mnemonic.txt', `${MNEMONIC}\n`);
put('admin-tokens.txt', `${ADMIN}\n`);
const env = {
  METARELAY_SENDER_KEYS_LOCAL_ONE: K3,
  METARELAY_QUOTE_SECRET_FILE: put('quote', QUOTE),
  DATABASE_URL_FILE: put('db-url', DB_URL),
};

describe('secrets from the environment and files', () => {
  it('reads senderKeysFile, senderMnemonicFile, admin.tokensFile, NAME and NAME_FILE variables', () => {
    const c = loadConfig({ file: cfgFile, env });
    expect(c.chains[0].relayer!.senderKeys).toEqual([K1, K2, K3]);
    expect(c.chains[1].relayer!.senderMnemonic).toBe(MNEMONIC);
    expect(c.relayer.quoteSecret).toBe(QUOTE);
    expect(c.admin.tokens).toEqual([ADMIN]);
    expect(c.database).toBe(DB_URL);
    // METARELAY_ADMIN_TOKEN still adds one, and the plain variable works like its _FILE twin.
    const c2 = loadConfig({ file: cfgFile, env: { METARELAY_ADMIN_TOKEN: 'x'.repeat(20), METARELAY_SENDER_MNEMONIC_SECOND: MNEMONIC.replace('junk', 'test') } });
    expect(c2.admin.tokens).toEqual([ADMIN, 'x'.repeat(20)]);
    expect(c2.chains[1].relayer!.senderMnemonic).toBe(MNEMONIC.replace('junk', 'test'));
  });

  it('refuses ambiguous or misdirected sources without quoting any secret', () => {
    const both = () => loadConfig({ file: cfgFile, env: { METARELAY_QUOTE_SECRET: QUOTE, METARELAY_QUOTE_SECRET_FILE: env.METARELAY_QUOTE_SECRET_FILE } });
    expect(both).toThrow(/set METARELAY_QUOTE_SECRET or METARELAY_QUOTE_SECRET_FILE, not both/);
    expect(() => loadConfig({ file: cfgFile, env: { METARELAY_SENDER_KEYS_MAINNET: K1 } })).toThrow(/METARELAY_SENDER_KEYS_MAINNET names no chain/);
    expect(() => loadConfig({ file: cfgFile, env: { METARELAY_SENDER_KEYS_FILE: join(dir, 'missing') } })).toThrow(ConfigError);
    const badKeys = put('bad-keys.txt', 'not-a-key-but-secret-anyway\n');
    const bad = put('bad.json', JSON.stringify({ chains: [{ chainId: 1, name: 'm', rpcUrls: ['http://x.example'], relayer: { senderKeysFile: badKeys } }] }));
    let message = '';
    try {
      loadConfig({ file: bad, env: {} });
    } catch (err) {
      message = (err as Error).message;
    }
    expect(message).toMatch(/chains\[0\]\.relayer\.senderKeys\[0\]: must be a 32-byte 0x private key/);
    expect(message).not.toContain('not-a-key-but-secret-anyway');
  });

  it('masks credentials in URLs', () => {
    expect(maskUrl('https://eth-mainnet.g.alchemy.com/v2/AbCdEf0123456789xyzKEY')).toBe('https://eth-mainnet.g.alchemy.com/v2/redacted');
    expect(maskUrl('https://rpc.example/?apikey=abc')).toBe('https://rpc.example/?apikey=redacted');
    expect(maskUrl(DB_URL)).toBe('postgres://metarelay:redacted@db.internal:5432/metarelay');
    expect(maskUrl('https://ipfs.io/ipfs/')).toBe('https://ipfs.io/ipfs/');
  });

  it('metarelay config --print shows the effective config with every secret masked', async () => {
    const r = await runCli(['config', '--print', '--config', cfgFile], env);
    expect(r.code, r.stderr).toBe(0);
    const printed = JSON.parse(r.stdout);
    expect(printed.chains[0].relayer.senderKeys).toEqual([K1, K2, K3].map((k) => `[redacted] (sender ${privateKeyToAccount(k as `0x${string}`).address})`));
    expect(printed.chains[1].relayer.senderMnemonic).toBe('[redacted]');
    expect(printed.chains[1].relayer.senderCount).toBe(2);
    expect(printed.relayer.quoteSecret).toBe('[redacted]');
    expect(printed.admin.tokens).toEqual(['[redacted]']);
    expect(printed.database).toBe('postgres://metarelay:redacted@db.internal:5432/metarelay');
    for (const secret of [K1.slice(2), K2.slice(2), K3.slice(2), MNEMONIC, 'QUOTESECRET', ADMIN, 'Pa55w0rdSecret', 'AbCdEf0123456789xyzKEY']) {
      expect(r.stdout + r.stderr).not.toContain(secret);
    }
  });
});
