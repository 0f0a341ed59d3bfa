import { readFileSync } from 'node:fs';
import { isAbsolute, resolve } from 'node:path';
import { ConfigError } from './errors.ts';

/**
 * Secrets kept out of the config file: environment variables, files the config names
 * (`senderKeysFile`, `senderMnemonicFile`, `relayer.quoteSecretFile`, `admin.tokensFile`), and the
 * `NAME_FILE` convention for every secret variable (container platforms mount secrets as files).
 * Runs on the merged raw config before the schema parses it. Errors name the variable or file,
 * never its content.
 */

type Raw = Record<string, unknown>;

function readSecretFile(path: string, what: string): string {
  try {
    return readFileSync(path, 'utf8').trim();
  } catch (err) {
    throw new ConfigError(`cannot read ${what} ${path}: ${(err as NodeJS.ErrnoException).code ?? 'unreadable'}`);
  }
}

/** NAME, or the content of the file NAME_FILE names; both set is a mistake worth stopping for. */
export function envSecret(env: NodeJS.ProcessEnv, name: string): string | undefined {
  const direct = env[name];
  const file = env[`${name}_FILE`];
  if (direct && file) throw new ConfigError(`set ${name} or ${name}_FILE, not both`);
  if (file) return readSecretFile(file, `${name}_FILE`);
  return direct || undefined;
}

/** One secret per line (blank lines and # comments skipped), or a JSON array of strings. */
function listOf(text: string, what: string): string[] {
  if (text.startsWith('[')) {
    let v: unknown;
    try {
      v = JSON.parse(text);
    } catch {
      throw new ConfigError(`${what} starts with "[" but is not a JSON array`);
    }
    if (!Array.isArray(v) || v.some((x) => typeof x !== 'string')) throw new ConfigError(`${what} must be a JSON array of strings`);
    return v as string[];
  }
  return text
    .split(/[\r\n,]+/)
    .map((l) => l.trim())
    .filter((l) => l && !l.startsWith('#'));
}

/** The variable a chain's sender secrets come from: METARELAY_SENDER_KEYS_ARBITRUM_ONE for "arbitrum-one". */
export function chainEnvName(prefix: string, chainName: string): string {
  return `${prefix}_${chainName.toUpperCase().replace(/-/g, '_')}`;
}

function fileKey(obj: Raw, key: string, baseDir: string, what: string): string | undefined {
  const p = obj[key];
  if (p === undefined) return undefined;
  delete obj[key];
  if (typeof p !== 'string' || !p) throw new ConfigError(`${what} must be a file path`);
  return readSecretFile(isAbsolute(p) ? p : resolve(baseDir, p), what);
}

const asObject = (v: unknown): Raw => (v && typeof v === 'object' && !Array.isArray(v) ? { ...(v as Raw) } : {});

/**
 * Returns a copy of `merged` with every secret source read in. Sender keys from all sources add up;
 * a mnemonic, the quote secret: one source each (the environment wins over the file, as elsewhere).
 */
export function applySecretSources(merged: Raw, env: NodeJS.ProcessEnv, baseDir: string): Raw {
  const out: Raw = { ...merged };

  const relayer = asObject(out.relayer);
  const quoteFromFile = fileKey(relayer, 'quoteSecretFile', baseDir, 'relayer.quoteSecretFile');
  const quote = envSecret(env, 'METARELAY_QUOTE_SECRET') ?? quoteFromFile;
  if (quote !== undefined) relayer.quoteSecret = quote;
  if (out.relayer !== undefined || quote !== undefined) out.relayer = relayer;

  const admin = asObject(out.admin);
  const tokens = Array.isArray(admin.tokens) ? [...admin.tokens] : [];
  const tokensFile = fileKey(admin, 'tokensFile', baseDir, 'admin.tokensFile');
  if (tokensFile !== undefined) tokens.push(...listOf(tokensFile, 'admin.tokensFile'));
  const envToken = envSecret(env, 'METARELAY_ADMIN_TOKEN');
  if (envToken) tokens.push(envToken);
  if (out.admin !== undefined || tokens.length) out.admin = { ...admin, tokens };

  if (Array.isArray(out.chains)) {
    const names = new Set<string>();
    out.chains = out.chains.map((c, i) => {
      const chain = asObject(c);
      const name = typeof chain.name === 'string' ? chain.name : '';
      names.add(chainEnvName('', name));
      const keysVar = chainEnvName('METARELAY_SENDER_KEYS', name);
      const mnemonicVar = chainEnvName('METARELAY_SENDER_MNEMONIC', name);
      const envKeys = name ? envSecret(env, keysVar) : undefined;
      const envMnemonic = name ? envSecret(env, mnemonicVar) : undefined;
      if (chain.relayer === undefined) {
        if (envKeys !== undefined || envMnemonic !== undefined) throw new ConfigError(`${envKeys !== undefined ? keysVar : mnemonicVar} is set but chain "${name}" has no "relayer" section`);
        return c;
      }
      const r = asObject(chain.relayer);
      const at = `chains[${i}].relayer`;
      const keys = Array.isArray(r.senderKeys) ? [...r.senderKeys] : [];
      const keysFile = fileKey(r, 'senderKeysFile', baseDir, `${at}.senderKeysFile`);
      if (keysFile !== undefined) keys.push(...listOf(keysFile, `${at}.senderKeysFile`));
      if (envKeys !== undefined) keys.push(...listOf(envKeys, keysVar));
      r.senderKeys = keys;
      const mnemonicFile = fileKey(r, 'senderMnemonicFile', baseDir, `${at}.senderMnemonicFile`);
      if (mnemonicFile !== undefined && r.senderMnemonic !== undefined) throw new ConfigError(`${at}: set senderMnemonic or senderMnemonicFile, not both`);
      const mnemonic = envMnemonic ?? mnemonicFile;
      if (mnemonic !== undefined) r.senderMnemonic = mnemonic;
      return { ...chain, relayer: r };
    });
    // A variable meant for a chain the config does not have is a typo that would leave a relayer keyless.
    for (const k of Object.keys(env)) {
      const m = /^METARELAY_SENDER_(?:KEYS|MNEMONIC)(_[A-Z0-9_]+?)(?:_FILE)?$/.exec(k);
      if (m && env[k] && !names.has(m[1])) throw new ConfigError(`${k} names no chain of the config (chain names: ${[...names].map((n) => n.slice(1).toLowerCase()).join(', ') || 'none'})`);
    }
  }
  return out;
}
