// A tokenURI or contractURI that points at this service's own collections is answered from the
// database, not fetched over HTTP from ourselves (no round trip, no SSRF exception for our own
// address, and a change is seen at once).

import type { CollectionsService } from './service.ts';

/** `/projects/<p>/collections/<c>[/contract.json]` or `…/tokens/<id>[.json]`; the id decimal or 64 hex digits (ERC-1155 `{id}`). */
const PATH = /^\/projects\/(\d{1,15})\/collections\/(\d{1,15})(?:\/?|\/contract\.json|\/tokens\/([0-9]{1,78}|[0-9a-fA-F]{64})(?:\.json)?)$/;

export type CollectionPath = { projectId: number; collectionId: number; tokenId: string | null };

/** The collection a path names, with the token id canonical (decimal); undefined when it names none. */
export function parseCollectionPath(pathname: string): CollectionPath | undefined {
  const m = PATH.exec(pathname);
  if (!m) return undefined;
  const raw = m[3];
  let tokenId: string | null = null;
  if (raw !== undefined) {
    // 64 digits are ERC-1155's `{id}` spelling: hex, as its standard says.
    const id = raw.length === 64 ? BigInt(`0x${raw}`) : BigInt(raw);
    if (id >= 2n ** 256n) return undefined;
    tokenId = id.toString();
  }
  return { projectId: Number(m[1]), collectionId: Number(m[2]), tokenId };
}

export type LocalAnswer = { ok: true; document: Record<string, unknown> } | { ok: false; message: string };

/**
 * The answer for a URL, when it is one of this service's collection URLs (same origin as the public
 * URL); undefined for any other URL, which is fetched as usual.
 */
export async function localCollectionDocument(collections: CollectionsService, publicUrl: string, uri: string): Promise<LocalAnswer | undefined> {
  let url: URL;
  let base: URL;
  try {
    url = new URL(uri);
    base = new URL(publicUrl);
  } catch {
    return undefined;
  }
  if (url.origin !== base.origin || url.search || url.hash) return undefined;
  const prefix = base.pathname.replace(/\/+$/, '');
  if (!url.pathname.startsWith(`${prefix}/projects/`)) return undefined;
  const p = parseCollectionPath(url.pathname.slice(prefix.length));
  if (!p) return undefined;
  const doc = p.tokenId === null ? await collections.publicContract(p.projectId, p.collectionId) : await collections.publicToken(p.projectId, p.collectionId, p.tokenId);
  return doc ? { ok: true, document: doc } : { ok: false, message: 'not a published collection token' };
}
