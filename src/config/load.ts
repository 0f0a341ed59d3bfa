import { readFileSync } from 'node:fs';
import { AppConfigSchema, type AppConfig, type AppConfigInput } from './schema.ts';

export class ConfigError extends Error {
  constructor(
    message: string,
    readonly problems: string[] = [],
  ) {
    super(problems.length ? `${message}\n  - ${problems.join('\n  - ')}` : message);
    this.name = 'ConfigError';
  }
}

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
  if (env.DATABASE_URL) out.database = env.DATABASE_URL;
  if (env.PORT) {
    const port = Number(env.PORT);
    out.port = Number.isInteger(port) ? port : (env.PORT as unknown as number);
  }
  if (env.LOG_LEVEL) out.logLevel = env.LOG_LEVEL as AppConfigInput['logLevel'];
  return out;
}

/** METARELAY_ADMIN_TOKEN adds to the admin tokens of the file rather than replacing them. */
function withEnvAdminToken(merged: Record<string, unknown>, env: NodeJS.ProcessEnv): Record<string, unknown> {
  const token = env.METARELAY_ADMIN_TOKEN;
  if (!token) return merged;
  const admin = (merged.admin ?? {}) as { tokens?: unknown };
  const tokens = Array.isArray(admin.tokens) ? admin.tokens : [];
  return { ...merged, admin: { ...admin, tokens: [...tokens, token] } };
}

/** METARELAY_QUOTE_SECRET sets relayer.quoteSecret, keeping the file's other relayer keys. */
function withEnvQuoteSecret(merged: Record<string, unknown>, env: NodeJS.ProcessEnv): Record<string, unknown> {
  const secret = env.METARELAY_QUOTE_SECRET;
  if (!secret) return merged;
  return { ...merged, relayer: { ...((merged.relayer ?? {}) as object), quoteSecret: secret } };
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
  return parseConfig(withEnvQuoteSecret(withEnvAdminToken(merged, env), env), opts.file ? `config file ${opts.file}` : 'config');
}
