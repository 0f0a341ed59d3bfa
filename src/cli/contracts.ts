import { readFileSync } from 'node:fs';
import type { Address } from 'viem';
import { NetworkRegistry } from '../chain/registry.ts';
import { OverrideLayer } from '../metadata/contracts/contract-merge.ts';
import { contractStore } from '../metadata/contracts/contract-store.ts';
import { directoryStore } from '../metadata/contracts/directory-store.ts';
import { TokenListSchema, importTokenList } from '../metadata/contracts/token-list.ts';
import { parse } from './args.ts';
import { UsageError } from './usage-error.ts';
import { progressReporter } from './progress.ts';
import { DB_FLAGS as common, withDb } from './db.ts';

async function readSource(source: string): Promise<unknown> {
  let text: string;
  if (/^https?:\/\//i.test(source)) {
    const res = await fetch(source, { signal: AbortSignal.timeout(60_000) });
    if (!res.ok) throw new UsageError(`${source}: HTTP ${res.status}`);
    text = await res.text();
  } else {
    try {
      text = readFileSync(source, 'utf8');
    } catch (err) {
      throw new UsageError(`cannot read ${source}: ${(err as Error).message}`);
    }
  }
  try {
    return JSON.parse(text);
  } catch (err) {
    throw new UsageError(`${source} is not JSON: ${(err as Error).message}`);
  }
}

/** `metarelay tokenlist import <file-or-url>` */
export async function runTokenList(argv: string[]) {
  const { values, positionals } = parse(argv, common);
  const [sub, source] = positionals;
  if (sub !== 'import' || !source) throw new UsageError('usage: metarelay tokenlist import <file-or-url>');
  const input = await readSource(source);
  // Refuse what is not a token list before touching the database.
  if (!TokenListSchema.safeParse(input).success) throw new UsageError(`${source} is not a token list: expected {"tokens": [...]}`);
  await withDb(values, async (db) => {
    const bar = progressReporter('importing');
    let result;
    try {
      result = await importTokenList(contractStore(db), input, { directory: directoryStore(db), onProgress: (p) => bar.update(p.done, p.total) });
    } finally {
      bar.finish();
    }
    console.log(JSON.stringify({ list: result.list, imported: result.imported, skipped: result.skipped.length }));
    for (const s of result.skipped.slice(0, 20)) console.error(`skipped tokens[${s.index}]: ${s.reason}`);
    if (result.skipped.length > 20) console.error(`… and ${result.skipped.length - 20} more skipped`);
  });
}

/** `metarelay contracts override --chain C --address A [--name …] [--clear]` */
export async function runContracts(argv: string[]) {
  const { values, positionals } = parse(argv, {
    ...common,
    chain: { type: 'string' },
    address: { type: 'string' },
    name: { type: 'string' },
    symbol: { type: 'string' },
    decimals: { type: 'string' },
    logo: { type: 'string' },
    type: { type: 'string' },
    description: { type: 'string' },
    link: { type: 'string' },
    verified: { type: 'boolean' },
    blacklist: { type: 'boolean' },
    clear: { type: 'boolean' },
  });
  if (positionals[0] !== 'override' || !values.chain || !values.address) {
    throw new UsageError(
      'usage: metarelay contracts override --chain NAME|ID --address 0x… [--name N] [--symbol S] [--decimals D] [--logo URL] [--type T] [--description D] [--link URL] [--verified] [--blacklist] | --clear',
    );
  }
  if (!/^0x[0-9a-fA-F]{40}$/.test(values.address)) throw new UsageError('--address must be a 20-byte 0x address');
  const chainName = values.chain;
  const address = values.address.toLowerCase() as Address;
  await withDb(values, async (db, config) => {
    const chainId = new NetworkRegistry(config.chains).chainIdOf(chainName);
    if (chainId === undefined) throw new UsageError(`unknown chain "${chainName}"`);
    let override: OverrideLayer | null = null;
    if (!values.clear) {
      const parsed = OverrideLayer.safeParse({
        name: values.name,
        symbol: values.symbol,
        decimals: values.decimals === undefined ? undefined : Number(values.decimals),
        logoURI: values.logo,
        type: values.type,
        extensions: {
          ...(values.description ? { description: values.description } : {}),
          ...(values.link ? { link: values.link } : {}),
          ...(values.verified ? { verified: true } : {}),
          ...(values.blacklist ? { blacklist: true } : {}),
        },
      });
      if (!parsed.success) throw new UsageError(parsed.error.issues.map((i) => `${i.path.join('.')}: ${i.message}`).join('; '));
      override = parsed.data;
    }
    const rows = await contractStore(db).upsertLayers(chainId, [{ address, override }]);
    const r = rows.get(address)!;
    console.log(JSON.stringify({ chainId, address, name: r.name, symbol: r.symbol, decimals: r.decimals, logoURI: r.logo_uri, type: r.type, source: r.source }));
  });
}
