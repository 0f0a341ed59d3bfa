import { z } from 'zod';

/**
 * The fields of a domain's fair shares of reads (indexer.readShares, metadata.readShares): a read costs
 * ceil(rows asked / rowsPerUnit) units; each key spends keyUnitsPerSec (burst keyBurst), each client
 * network of a publishable key (ipv4Prefix / ipv6Prefix) a clientFraction of that, with at most
 * clientConcurrency units running and clientQueue requests waiting. One shape, so the two stay alike;
 * each domain sets its own rowsPerUnit and may add fields.
 */
export const readSharesFields = (rowsPerUnit: number) => ({
  enabled: z.boolean().default(true),
  rowsPerUnit: z.number().int().min(1).default(rowsPerUnit),
  keyUnitsPerSec: z.number().positive().default(1_000),
  keyBurst: z.number().int().min(1).default(2_000),
  clientFraction: z.number().positive().max(1).default(0.1),
  clientConcurrency: z.number().int().min(1).default(40),
  clientQueue: z.number().int().min(0).default(8),
  ipv4Prefix: z.number().int().min(8).max(32).default(24),
  ipv6Prefix: z.number().int().min(16).max(128).default(48),
});
