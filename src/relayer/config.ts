import type { ChainConfig } from '../config/schema.ts';

/** One chain's relayer settings, as the config schema parses them. */
export type RelayerChainConfig = NonNullable<ChainConfig['relayer']>;
