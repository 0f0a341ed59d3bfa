import type { Address } from 'viem';
import { z } from 'zod';
import { cleanExtensions, type ListLayer } from './contract-merge.ts';
import type { ContractStore } from './contract-store.ts';
import type { DirectoryStore } from './directory-store.ts';

/** A token list in the Uniswap format; entries are checked one by one so one bad entry skips alone. */
export const TokenListSchema = z.object({
  name: z.string().optional(),
  tokens: z.array(z.unknown()),
});

const Entry = z.object({
  chainId: z.number().int().positive(),
  address: z.string().regex(/^0x[0-9a-fA-F]{40}$/, 'not a 20-byte 0x address'),
  name: z.string().max(200),
  symbol: z.string().max(64),
  decimals: z.number().int().min(0).max(255),
  logoURI: z.string().max(2048).optional(),
  extensions: z.unknown().optional(),
});

export interface ImportProgress {
  done: number;
  total: number;
}

export interface ImportResult {
  list: string;
  imported: number;
  skipped: { index: number; reason: string }[];
}

export async function importTokenList(
  store: ContractStore,
  input: unknown,
  opts: {
    batchSize?: number;
    onProgress?: (p: ImportProgress) => void;
    /** Listed contracts join the token directory (never reviving one an admin removed). */
    directory?: DirectoryStore;
  } = {},
): Promise<ImportResult> {
  const list = TokenListSchema.parse(input);
  const listName = list.name ?? 'token list';
  const skipped: ImportResult['skipped'] = [];
  const byChain = new Map<number, { address: Address; list: ListLayer }[]>();
  list.tokens.forEach((raw, index) => {
    const e = Entry.safeParse(raw);
    if (!e.success) {
      skipped.push({ index, reason: e.error.issues.map((i) => `${i.path.join('.')}: ${i.message}`).join('; ') });
      return;
    }
    const t = e.data;
    const rows = byChain.get(t.chainId) ?? [];
    rows.push({
      address: t.address.toLowerCase() as Address,
      list: { name: t.name, symbol: t.symbol, decimals: t.decimals, logoURI: t.logoURI, extensions: cleanExtensions(t.extensions), list: listName },
    });
    byChain.set(t.chainId, rows);
  });
  const total = list.tokens.length - skipped.length;
  const size = opts.batchSize ?? 500;
  let done = 0;
  for (const [chainId, rows] of byChain) {
    // A list naming one address twice on a chain: the last entry wins.
    const unique = [...new Map(rows.map((r) => [r.address, r])).values()];
    for (let i = 0; i < unique.length; i += size) {
      const batch = unique.slice(i, i + size);
      await store.upsertLayers(chainId, batch);
      await opts.directory?.add(
        chainId,
        batch.map((r) => r.address),
        'list',
      );
      done += batch.length;
      opts.onProgress?.({ done, total });
    }
    done += rows.length - unique.length;
  }
  return { list: listName, imported: done, skipped };
}
