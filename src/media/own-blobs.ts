// A media URL of this service's own content-addressed originals (what collection documents name)
// is read from the blob store, not fetched over HTTP from ourselves.

import { originalKey, type BlobStore } from './blob-store.ts';
import type { BytesFetcher } from './service.ts';

const ORIGINAL = /^\/media\/b\/([0-9a-f]{64})\/original$/;

export function ownBlobsFirst(inner: BytesFetcher, blobs: BlobStore, publicUrl: () => string): BytesFetcher {
  const own = (uri: string) => uri.startsWith(`${publicUrl()}/media/b/`);
  return {
    // Our own originals are read from the blob store: no host's share is spent on them.
    shareOf: (uri) => (own(uri) ? '' : inner.shareOf(uri)),
    async fetchBytes(uri, opts) {
      const base = publicUrl();
      if (own(uri)) {
        const m = ORIGINAL.exec(uri.slice(base.length));
        const bytes = m ? await blobs.get(originalKey(m[1])) : undefined;
        if (bytes && bytes.length <= opts.maxBytes) return { ok: true, bytes, finalUrl: uri };
      }
      return inner.fetchBytes(uri, opts);
    },
  };
}
