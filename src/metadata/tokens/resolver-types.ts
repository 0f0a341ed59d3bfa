// The shapes of token resolution: what the token metadata service depends on, the media hooks it
// tells and asks, what a read answers, and why a token is resolved.

import type { Address } from 'viem';
import type { ChainClient } from '../../chain/client.ts';
import type { AppConfig } from '../../config/schema.ts';
import type { Logger } from '../../telemetry/logger.ts';
import type { Metrics } from '../../telemetry/metrics.ts';
import type { FleetSize } from '../../util/fleet-share.ts';
import type { Fetcher } from '../fetch/fetch.ts';
import type { TokenStore } from './token-store.ts';
import type { ResourceStatus, TokenMetadataWire } from './token-view.ts';

export interface TokenMetadataDeps {
  store: TokenStore;
  fetcher: Fetcher;
  config: AppConfig;
  log: Logger;
  metrics: Metrics;
  /**
   * Reads the standard of a contract this service has not classified yet. Contract info provides it
   * (one read that also makes the contract searchable); plain ERC165 detection otherwise.
   */
  detectStandard?: (chain: ChainClient, address: Address) => Promise<string>;
  /** The media pipeline, when enabled (the wiring adapts it): told about resolutions, asked for `assets`. */
  media?: TokenMediaHooks;
  /** The API processes sharing the keyless fetch rates (util/fleet-share.ts); none: this process alone. */
  fleet?: FleetSize;
}

/** Media URLs of one resolved token, by TokenMetadata field. */
export type TokenMediaUrls = { tokenId: string; urls: { image: string | null; image_data: string | null; animation_url: string | null } };

export interface TokenMediaHooks {
  /**
   * `read`: a token resolved for an API answer with an access key (media fetched eagerly if so configured);
   * `keylessRead` and `refresh`: re-check cached media only (a keyless read never queues media).
   */
  onResolved(chainId: number, contract: string, tokens: TokenMediaUrls[], via: Via): void;
  /** The `assets` entries of these tokens, with their JSON (serialised once by the media side; '' when none). */
  assetsFor(chainId: number, contract: string, tokenIds: string[]): Promise<Map<string, { list: Array<{ url: string; metadataField: string }>; json: string }>>;
  /** Rewrite `image` to the cached URL (config media.rewriteImage). */
  rewriteImage: boolean;
}

export interface GetTokensResult {
  /** Each token serialised, in request order: what responses are assembled from. */
  json: string[];
  statuses: ResourceStatus[];
  /** Some tokens are still being resolved in the background. */
  pending: boolean;
  /** The same tokens as objects (parsed on demand). */
  readonly tokens: TokenMetadataWire[];
  /**
   * Until when (epoch ms) this very answer may be given again without asking: no later than the
   * hot cache would keep any of its records, nor than any of them turns stale. 0 when some token
   * is not AVAILABLE or still resolving, since the next request must look again.
   */
  reusableUntil: number;
  /** False once a token of the contract has been re-resolved in this process since the answer was read. */
  isCurrent(): boolean;
}

/** Why a token is resolved: for a keyed read, a keyless one, or a refresh. */
export type Via = 'read' | 'keylessRead' | 'refresh';
