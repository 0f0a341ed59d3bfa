// The shapes the media service's stages and its callers share: its options, the part of the metadata
// fetcher it needs, and the answers it gives (renditions, a token's assets, a contract's media).

import type { AssetWire } from './asset-wire.ts';
import type { MediaField } from './media-store.ts';
import type { ProbeLimits } from './probe.ts';

/** The part of the metadata fetcher media needs (the wiring passes the real one). */
export type BytesFetcher = {
  /** Where fetching this URI sends requests: a host, the gateways' share, or '' (no request). */
  shareOf(uri: string): string;
  fetchBytes(
    uri: string,
    opts: { maxBytes: number; totalTimeoutMs?: number; stallTimeoutMs?: number },
  ): Promise<{ ok: true; bytes: Buffer; finalUrl: string } | { ok: false; reason: string; message: string; retryAfterMs?: number }>;
};

export type MediaOptions = ProbeLimits & {
  maxBytes: number;
  fetchTimeoutMs: number;
  concurrency: number;
  /** Fetches one origin host runs at once (waiting ones are served round-robin across hosts). */
  perHostConcurrency: number;
  /** A host earns a slot (up to `concurrency`) per file fetched within this, and halves them per slower one. */
  fastHostMs?: number;
  /** Fetches the IPFS and Arweave gateways run at once, together. */
  gatewayConcurrency: number;
  /** A body that sends nothing for this long mid-transfer is given up. */
  stallTimeoutMs: number;
  maxQueued: number;
  failureRetrySec: number;
  /** A field whose bytes the blob store refused is fetched again after this long (retryStoreFailures). */
  storeRetrySec: number;
  eager: boolean;
  publicUrl?: string;
};

export type RenditionResult = { ok: true; bytes: Buffer; contentType: string } | { ok: false; reason: string; message: string };

/** A token's assets and their JSON (empty string when there are none). */
export type TokenAssets = { list: AssetWire[]; json: string };

export type TokenMedia = { tokenId: string; urls: Partial<Record<MediaField, string | null>> };

/** A contract's media sources as its ContractInfo names them (logoURI, extensions.ogImage). */
export type ContractMediaSource = { address: string; logo: string | null; ogImage: string | null };
/** The cached URLs of a contract's media, where stored. */
export type ContractMediaUrls = { logo?: string; ogImage?: string };

export function isImage(mime: string): boolean {
  return mime.startsWith('image/');
}
