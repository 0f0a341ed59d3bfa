import type { Address } from 'viem';
import type { ChainClient } from '../../chain/client.ts';
import { ChainUnreachableError } from '../../chain/outage.ts';
import type { AppConfig } from '../../config/schema.ts';
import type { Logger } from '../../telemetry/logger.ts';
import type { Metrics } from '../../telemetry/metrics.ts';
import { uriLayerFromDocument, type UriLayer } from './contract-merge.ts';
import { readContracts, type ChainLayer } from './contract-reader.ts';
import type { ContractRow, ContractStore, LayerUpdate } from './contract-store.ts';
import { contractToWire, withCachedMedia, type ContractInfoWire, type ContractMediaLookup } from './contract-view.ts';
import type { Fetcher } from '../fetch/fetch.ts';
import { Limiter } from '../../util/limiter.ts';
import { KeyedFlight } from '../../util/single-flight.ts';
import { within } from '../../util/deadline.ts';
import type { ResourceStatus } from '../tokens/token-view.ts';
import { toHttpMediaUrl } from '../fetch/uri.ts';

export interface ContractInfoDeps {
  store: ContractStore;
  fetcher: Fetcher;
  config: AppConfig;
  log: Logger;
  metrics: Metrics;
  /** The media pipeline's cached logos (the answers' cachedMedia extra); none without media. */
  media?: ContractMediaLookup;
}

export interface GetContractsResult {
  infos: Map<string, ContractInfoWire>;
  pending: boolean;
}

/**
 * Contract info with the same cache semantics as tokens: served from the store, read from the
 * chain (one round trip for a whole batch) when never seen or stale, within a bounded wait.
 */
export class ContractInfoService {
  private readonly flight = new KeyedFlight<ContractRow>();
  private readonly limiter: Limiter;

  /** How stored logos are served: through the configured IPFS and Arweave gateways. */
  readonly mediaUrl = (uri: string): string | null => toHttpMediaUrl(uri, { ipfsGateways: this.d.config.ipfsGateways, arweaveGateway: this.d.config.arweaveGateway });

  constructor(private readonly d: ContractInfoDeps) {
    this.limiter = new Limiter(d.config.metadata.fetchConcurrency);
  }

  /** `eager`: the caller has an access key, so logos and og:images not stored yet are queued (media.eager). */
  async get(chain: ChainClient, addresses: Address[], opts: { waitMs?: number; eager?: boolean } = {}): Promise<GetContractsResult> {
    const cfg = this.d.config.metadata;
    const now = Date.now();
    const unique = [...new Set(addresses)];
    const rows = await this.d.store.getMany(chain.chainId, unique);
    const toResolve: Address[] = [];
    const refreshing = new Set<string>();
    for (const a of unique) {
      const r = rows.get(a);
      if (!r?.info_fetched_at) toResolve.push(a);
      else if (now - r.info_fetched_at.getTime() > cfg.staleAfterSec * 1000) refreshing.add(a);
    }
    if (refreshing.size) void this.resolve(chain, [...refreshing] as Address[]).catch(() => undefined);

    const pending = new Set<string>();
    if (toResolve.length) {
      const r = await within(this.resolve(chain, toResolve), opts.waitMs ?? cfg.inlineWaitMs);
      if (r.state === 'done') for (const [a, row] of r.value) rows.set(a, row);
      else {
        // While the node is down the outage is logged once, by the chain's health, not here per request.
        if (r.state === 'failed' && chain.health.ok) this.d.log.warn({ err: r.error, chain: chain.name }, 'contract info resolution failed');
        toResolve.forEach((a) => pending.add(a));
        // Never read and the node is down: a 503 naming the chain tells the caller more than NOT_AVAILABLE.
        if (!chain.health.ok && toResolve.some((a) => !rows.get(a)?.info_fetched_at)) throw new ChainUnreachableError(chain.chainId);
      }
    }

    const infos = new Map<string, ContractInfoWire>();
    for (const a of unique) {
      const r = rows.get(a);
      const status: ResourceStatus = pending.has(a) ? (r ? 'REFRESHING' : 'NOT_AVAILABLE') : refreshing.has(a) ? 'REFRESHING' : 'AVAILABLE';
      infos.set(a, contractToWire(chain.chainId, a, r, r || !pending.has(a) ? status : 'NOT_AVAILABLE', pending.has(a) || refreshing.has(a) ? new Date(now) : null, this.mediaUrl));
    }
    await withCachedMedia(
      this.d.media,
      chain.chainId,
      [...infos.values()].filter((i) => i.status !== 'NOT_AVAILABLE'),
      opts.eager === true,
    );
    return { infos, pending: pending.size > 0 || refreshing.size > 0 };
  }

  /** Re-reads now, whatever the cache says: the refresh path. */
  refresh(chain: ChainClient, addresses: Address[]): Promise<Map<string, ContractRow>> {
    return this.resolve(chain, addresses);
  }

  /** Starts a background read of contracts met elsewhere (token metadata), so they become searchable. */
  learn(chain: ChainClient, addresses: Address[]): void {
    void this.d.store
      .getMany(chain.chainId, addresses)
      .then((rows) => {
        const unknown = addresses.filter((a) => !rows.get(a)?.info_fetched_at);
        if (unknown.length) return this.resolve(chain, unknown);
      })
      .catch((err) => this.d.log.warn({ err, chain: chain.name }, 'background contract read failed'));
  }

  private resolve(chain: ChainClient, addresses: Address[]): Promise<Map<string, ContractRow>> {
    return this.flight.runScoped(String(chain.chainId), addresses, (missing) => this.resolveBatch(chain, missing as Address[]));
  }

  /**
   * The standard of a contract met through its tokens, from the same one-round-trip read contract
   * info uses; the rest of its info (contractURI) is completed in the background, so the contract
   * becomes searchable without a second read of the chain.
   */
  async detect(chain: ChainClient, address: Address): Promise<string> {
    const layer = (await readContracts(chain, [address])).get(address)!;
    void this.complete(chain, new Map([[address, layer]])).catch((err) => this.d.log.warn({ err, chain: chain.name, address }, 'background contract info failed'));
    return layer.type;
  }

  private async resolveBatch(chain: ChainClient, addresses: Address[]): Promise<Map<string, ContractRow>> {
    return this.complete(chain, await readContracts(chain, addresses));
  }

  /** Adds each contract's contractURI document to its chain layer and stores both. */
  private async complete(chain: ChainClient, layers: Map<Address, ChainLayer>): Promise<Map<string, ContractRow>> {
    const uriOpts = { ipfsGateways: this.d.config.ipfsGateways, arweaveGateway: this.d.config.arweaveGateway };
    const updates: LayerUpdate[] = await Promise.all(
      [...layers].map(async ([address, chainLayer]) => {
        // A contractURI that fails to load keeps the last good document (undefined = keep).
        let uri: UriLayer | null | undefined = null;
        let failure: string | null = null;
        if (chainLayer.contractURI) {
          const f = await this.limiter.run(() => this.d.fetcher.fetchJson(chainLayer.contractURI!));
          this.d.metrics.metadataFetches.inc({ scheme: 'contractURI', outcome: f.ok ? 'ok' : f.reason });
          if (f.ok) uri = uriLayerFromDocument(f.document, (u) => toHttpMediaUrl(u, uriOpts));
          else {
            // A withdrawn document (an unpublished collection of ours) goes; any other failure keeps the last good one.
            uri = f.withdrawn ? null : undefined;
            failure = `contractURI: ${f.reason}: ${f.message}`;
          }
        }
        return { address, chain: chainLayer, uri, fetched: true, failure };
      }),
    );
    return this.d.store.upsertLayers(chain.chainId, updates);
  }
}
