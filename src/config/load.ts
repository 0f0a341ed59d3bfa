import { readFileSync } from 'node:fs';
import { dirname } from 'node:path';
import { applySecretSources, envSecret } from './secrets.ts';
import { ConfigError } from './errors.ts';
import { AppConfigSchema, type AppConfig, type AppConfigInput } from './schema.ts';

export { ConfigError } from './errors.ts';

function deepFreeze<T>(v: T): T {
  if (v && typeof v === 'object' && !Object.isFrozen(v)) {
    Object.freeze(v);
    for (const k of Object.keys(v)) deepFreeze((v as Record<string, unknown>)[k]);
  }
  return v;
}

function formatPath(path: PropertyKey[]): string {
  return path.reduce<string>((acc, p) => (typeof p === 'number' ? `${acc}[${p}]` : acc ? `${acc}.${String(p)}` : String(p)), '');
}

/** Environment overrides that deployments set without editing the file. */
function envOverrides(env: NodeJS.ProcessEnv): Partial<AppConfigInput> {
  const out: Partial<AppConfigInput> = {};
  // A database URL holds a password: DATABASE_URL_FILE too.
  const database = envSecret(env, 'DATABASE_URL');
  if (database) out.database = database;
  if (env.PORT) {
    const port = Number(env.PORT);
    out.port = Number.isInteger(port) ? port : (env.PORT as unknown as number);
  }
  if (env.LOG_LEVEL) out.logLevel = env.LOG_LEVEL as AppConfigInput['logLevel'];
  return out;
}

/** Parses once, with one schema; every problem names its key. The result is deeply frozen. */
export function parseConfig(input: unknown, source = 'config'): AppConfig {
  const res = AppConfigSchema.safeParse(input);
  if (!res.success) {
    const problems = res.error.issues.map((i) => `${formatPath(i.path) || '(root)'}: ${i.message}`);
    throw new ConfigError(`invalid ${source}`, problems);
  }
  return deepFreeze(res.data);
}

export interface LoadConfigOptions {
  file?: string;
  overrides?: Partial<AppConfigInput>;
  env?: NodeJS.ProcessEnv;
}

export function loadConfig(opts: LoadConfigOptions = {}): AppConfig {
  let fromFile: Record<string, unknown> = {};
  if (opts.file) {
    let text: string;
    try {
      text = readFileSync(opts.file, 'utf8');
    } catch (err) {
      throw new ConfigError(`cannot read config file ${opts.file}: ${(err as Error).message}`);
    }
    try {
      fromFile = JSON.parse(text);
    } catch (err) {
      throw new ConfigError(`config file ${opts.file} is not valid JSON: ${(err as Error).message}`);
    }
    if (!fromFile || typeof fromFile !== 'object' || Array.isArray(fromFile)) {
      throw new ConfigError(`config file ${opts.file} must hold a JSON object`);
    }
  }
  // Precedence: file < environment < command-line flags.
  const merged = { ...fromFile, ...envOverrides(opts.env ?? process.env), ...(opts.overrides ?? {}) };
  const env = opts.env ?? process.env;
  // Secrets from the environment and from files (METARELAY_ADMIN_TOKEN adds to the file's admin tokens;
  // METARELAY_QUOTE_SECRET sets relayer.quoteSecret; see secrets.ts); file paths are relative to the config.
  const withSecrets = applySecretSources(merged, env, opts.file ? dirname(opts.file) : process.cwd());
  return parseConfig(withSecrets, opts.file ? `config file ${opts.file}` : 'config');
}
