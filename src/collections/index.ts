// The door the wiring and the HTTP layer use.
import type { ChainClient } from '../chain/client.ts';
import type { Common } from '../common.ts';
import { createMediaUploads, type MediaService } from '../media/index.ts';
import type { Fetcher } from '../metadata/index.ts';
import { ChangeFanout } from './change-fanout.ts';
import { localFirstFetcher } from './local-fetcher.ts';
import { refreshLinked, type LinkedRefresh } from './refresh-links.ts';
import { CollectionsService } from './service.ts';
import { collectionStore } from './store.ts';

export { CollectionsService, CollectionError, DOCUMENT_FIELDS, documentOf, type Actor, type CollectionsDeps } from './service.ts';
export { collectionStore, type CollectionStore, type CollectionRecord, type TokenRecord, type AssetRecord, type ContractLink } from './store.ts';
export { localFirstFetcher } from './local-fetcher.ts';
export { parseCollectionPath } from './local-documents.ts';
export { ChangeFanout } from './change-fanout.ts';
export type { LinkedRefresh } from './refresh-links.ts';

export interface Collections {
  /** Collections: a project's token metadata and media hosted here (needs the media pipeline). */
  collections?: CollectionsService;
  /** The metadata fetcher: token and contract URIs pointing at this service's own collections are answered from the database. */
  fetcher: Fetcher;
  /** Settles once the refreshes of the edits noted so far are queued. */
  collectionsIdle(): Promise<void>;
}

/**
 * `refresh`: the metadata domain's refresh queue (built after this, since it reads through `fetcher`),
 * asked for when the first edit is queued.
 */
export function createCollections(
  { config, db, log, fleet }: Common,
  deps: { media?: MediaService; chains: ReadonlyMap<number, ChainClient>; fetcher: Fetcher; refresh: () => LinkedRefresh },
): Collections {
  const { media, chains } = deps;
  if (!media) return { fetcher: deps.fetcher, collectionsIdle: async () => undefined };
  // A collection edit refreshes the linked contracts' cached metadata, in the background, merged per contract.
  const fanout = new ChangeFanout(refreshLinked(chains, deps.refresh, log), (err) => log.warn({ err }, 'could not queue the refreshes of a collection edit'));
  const collections = new CollectionsService({
    store: collectionStore(db),
    uploads: createMediaUploads(config, db, media),
    blobUrl: (b) => media.blobUrl(b),
    publicUrl: () => media.publicUrl,
    quotas: config.collections.quotas,
    uploadRate: config.collections.uploads,
    fleet,
    // A link is proven by reading the contract (link-proof.ts) on a configured chain.
    linkChain: (chainId) => {
      const c = chains.get(chainId);
      return c && { readContract: (a) => c.public.readContract(a as never), verifyMessage: (a) => c.public.verifyMessage(a) };
    },
    onChanged: async (links, projectId, ids) => fanout.add(links, projectId, ids),
  });
  return { collections, fetcher: localFirstFetcher(deps.fetcher, collections, () => media.publicUrl), collectionsIdle: () => fanout.idle() };
}
