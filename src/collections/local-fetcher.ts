// The metadata fetcher with this service's own collection URLs answered from the database
// (local-documents.ts); every other URL goes to the real fetcher untouched.

import type { Fetcher, FetchJsonOptions, FetchResult } from '../metadata/index.ts';
import { localCollectionDocument } from './local-documents.ts';
import type { CollectionsService } from './service.ts';

export function localFirstFetcher(inner: Fetcher, collections: CollectionsService, publicUrl: () => string): Fetcher {
  return {
    ...inner,
    // Answered from the database: no origin host's share is spent on this service's own documents.
    shareOf: (uri: string) => (uri.startsWith(`${publicUrl()}/`) ? '' : inner.shareOf(uri)),
    async fetchJson(uri: string, opts: FetchJsonOptions = {}): Promise<FetchResult> {
      // ERC-1155's `{id}`: the 64-hex-digit spelling (the standard's), which the local path accepts.
      const expanded = opts.tokenId !== undefined && uri.includes('{id}') ? uri.replaceAll('{id}', opts.tokenId.toString(16).padStart(64, '0')) : uri;
      const t0 = performance.now();
      const local = await localCollectionDocument(collections, publicUrl(), expanded);
      if (!local) return inner.fetchJson(uri, opts);
      const ms = Math.round(performance.now() - t0);
      if (!local.ok) {
        // Our own answer, so certain: the owner unpublished or deleted it, and it must stop being served.
        return { ok: false, reason: 'HTTP_404', retryable: false, withdrawn: true, message: `${local.message} (answered locally)`, trace: [{ url: expanded, status: 404, bytes: 0, ms }] };
      }
      const bytes = Buffer.byteLength(JSON.stringify(local.document));
      return {
        ok: true,
        document: local.document,
        finalUrl: expanded,
        contentType: 'application/json',
        trace: [{ url: expanded, status: 200, bytes, ms }],
        ...(opts.tokenId !== undefined && expanded !== uri ? { idVariant: 0 } : {}),
      };
    },
  };
}
