// The resolution stage of token metadata: a batch of one contract's tokens read on chain (their URIs),
// each document fetched at its origin in the fetch slots, normalised, and saved in groups as they
// come in (the hot cache, the contract's stamp and the media pipeline told of each group).

import type { Address } from 'viem';
import type { ChainClient } from '../../chain/client.ts';
import type { LruCache } from '../../util/lru.ts';
import { parseTokenUri } from '../fetch/uri.ts';
import type { ContractStamps } from './answer-stamps.ts';
import { readTokenUris } from './chain-reader.ts';
import type { ContractKinds } from './contract-kind.ts';
import type { FetchCaller, FetchShares } from './fetch-shares.ts';
import { groupSaver } from './group-saver.ts';
import { ID_VARIANTS } from './id-template.ts';
import { normalizeTokenDocument } from './normalize.ts';
import type { TokenMediaUrls, TokenMetadataDeps, Via } from './resolver-types.ts';
import type { Resolution, TokenRecord } from './token-store.ts';
import { StoredTokenMetadata } from './token-view.ts';

function schemeOf(uri: string): string {
  const m = /^([a-z][a-z0-9+.-]*):/i.exec(uri.trim());
  return m ? m[1].toLowerCase() : uri.trim().startsWith('{') ? 'json' : 'none';
}

export class TokenBatchResolver {
  constructor(
    private readonly d: TokenMetadataDeps,
    private readonly shares: FetchShares,
    private readonly kinds: ContractKinds,
    private readonly hot: LruCache<TokenRecord>,
    private readonly stamps: ContractStamps,
  ) {}

  async run(
    chain: ChainClient,
    contract: Address,
    ids: string[],
    via: Via,
    onSaved: (id: string, rec: TokenRecord) => void = () => undefined,
    caller?: FetchCaller,
  ): Promise<Map<string, TokenRecord>> {
    const cfg = this.d.config;
    const kind = await this.kinds.of(chain, contract);
    const standard = kind.standard;
    const { reads, blockNumber } = await readTokenUris(
      chain,
      contract,
      standard,
      ids.map((id) => BigInt(id)),
    );
    const now = Date.now();
    const saver = groupSaver(async (batch: Map<string, Resolution>) => {
      const saved = await this.d.store.save(chain.chainId, contract, batch, new Date(now + cfg.metadata.failureRetrySec * 1000));
      for (const [id, rec] of saved) {
        this.hot.set(`${chain.chainId}:${contract}:${id}`, rec);
        onSaved(id, rec);
      }
      this.stamps.restamp(`${chain.chainId}:${contract}`);
      if (this.d.media) this.d.media.onResolved(chain.chainId, contract, mediaUrlsOf(saved), via);
      return saved;
    });
    const results = { set: (id: string, r: Resolution) => saver.add(id, r) };
    const uriOpts = { ipfsGateways: cfg.ipfsGateways, arweaveGateway: cfg.arweaveGateway };

    // Work of no caller (refreshes, background reads) queues as its own kind, beside the callers.
    const queue = caller?.queue ?? via;
    await Promise.all(
      ids.map(async (id, i) => {
        const read = reads[i];
        const base = { standard, method: read.method, block: blockNumber?.toString() ?? null };
        if (!read.ok) {
          this.d.metrics.metadataFetches.inc({ scheme: 'none', outcome: read.reason });
          results.set(id, {
            ok: false,
            tokenUri: null,
            reason: read.reason,
            message: read.message,
            retryAfter: new Date(now + cfg.metadata.notFoundRetrySec * 1000),
            trace: { ...base, uri: null, error: read.reason, message: read.message, attempts: [] },
          });
          return;
        }
        const scheme = schemeOf(read.uri);
        const decoder = parseTokenUri(read.uri, uriOpts).kind;
        // Only the fetch holds a slot: the slot is the origin's share, not the bookkeeping around it.
        const f = await this.shares.gate.run({ queue, host: this.d.fetcher.shareOf(read.uri), keyless: caller?.keyless }, async () => {
          const t0 = performance.now();
          const r = await this.d.fetcher.fetchJson(
            read.uri,
            // uri(id) is the ERC-1155 method: its `{id}` is expanded even when ERC165 did not say ERC1155.
            standard === 'ERC1155' || read.method === 'uri' ? { tokenId: BigInt(id), preferredIdVariant: kind.idVariant } : {},
          );
          this.d.metrics.metadataFetchDuration.observe({ scheme }, (performance.now() - t0) / 1000);
          return r;
        });
        this.d.metrics.metadataFetches.inc({ scheme, outcome: f.ok ? 'ok' : f.reason });
        const trace = {
          ...base,
          uri: read.uri,
          decoder,
          ...(f.ok && f.idVariant !== undefined ? { idVariant: ID_VARIANTS[f.idVariant] } : {}),
          attempts: f.trace,
          ...(f.ok ? { finalUrl: f.finalUrl, contentType: f.contentType } : { error: f.reason, message: f.message }),
        };
        if (!f.ok) {
          const wait = Math.max(cfg.metadata.failureRetrySec * 1000, f.retryAfterMs ?? 0);
          results.set(id, { ok: false, tokenUri: read.uri, reason: f.reason, message: f.message, retryAfter: new Date(now + wait), trace, ...(f.withdrawn ? { withdrawn: true } : {}) });
          return;
        }
        if (f.idVariant !== undefined && f.idVariant !== (kind.idVariant ?? 0)) {
          // Remember the spelling this origin answers to, so the next token skips the 404s.
          kind.idVariant = f.idVariant;
          await this.d.store.saveIdVariant(chain.chainId, contract, f.idVariant);
        }
        const n = normalizeTokenDocument(f.document, uriOpts);
        results.set(id, { ok: true, tokenUri: read.uri, metadata: n.metadata, raw: n.raw, trace, source: 'FETCHER_ON_CHAIN_TOKEN_URI' });
      }),
    );

    return saver.drain();
  }
}

function mediaUrlsOf(records: Map<string, TokenRecord>): TokenMediaUrls[] {
  const out: TokenMediaUrls[] = [];
  for (const [tokenId, rec] of records) {
    const parsed = rec.metadata ? StoredTokenMetadata.safeParse(rec.metadata) : undefined;
    if (!parsed?.success) continue;
    const m = parsed.data;
    const svg = m.imageData ? `data:image/svg+xml;base64,${Buffer.from(m.imageData, 'utf8').toString('base64')}` : null;
    out.push({ tokenId, urls: { image: m.image ?? null, image_data: svg, animation_url: m.animationUrl ?? null } });
  }
  return out;
}
