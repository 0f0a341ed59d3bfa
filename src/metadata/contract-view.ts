import { z } from 'zod';
import { Extensions } from './contract-merge.ts';
import type { ContractRow } from './contract-store.ts';
import type { ResourceStatus } from './token-view.ts';

/** The Sequence ContractInfo wire shape. */
export const ContractInfoWire = z.object({
  chainId: z.number().int(),
  address: z.string(),
  source: z.string(),
  name: z.string(),
  type: z.string(),
  symbol: z.string(),
  decimals: z.number().int().optional(),
  logoURI: z.string(),
  deployed: z.boolean(),
  bytecodeHash: z.string(),
  extensions: Extensions,
  updatedAt: z.string(),
  queuedAt: z.string().nullable(),
  status: z.enum(['NOT_AVAILABLE', 'REFRESHING', 'AVAILABLE']),
});
export type ContractInfoWire = z.infer<typeof ContractInfoWire>;

export function contractToWire(chainId: number, address: string, row: ContractRow | undefined, status: ResourceStatus, queuedAt: Date | null): ContractInfoWire {
  return {
    chainId,
    address,
    source: row?.source ?? 'UNKNOWN',
    name: row?.name ?? '',
    type: row?.type ?? 'UNKNOWN',
    symbol: row?.symbol ?? '',
    ...(row?.decimals != null ? { decimals: row.decimals } : {}),
    logoURI: row?.logo_uri ?? '',
    deployed: row?.deployed ?? false,
    bytecodeHash: row?.bytecode_hash ?? '0x',
    extensions: row?.extensions ?? {},
    updatedAt: (row?.updated_at ?? new Date()).toISOString(),
    queuedAt: queuedAt ? queuedAt.toISOString() : null,
    status,
  };
}
