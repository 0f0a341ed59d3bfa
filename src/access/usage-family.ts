/**
 * A request's method family (store/access-keys.ts FAMILIES), for the project overview's counts: read
 * from the path it was sent to, once per admitted request, so counting costs a few string compares.
 * The index into FAMILIES is what the authenticator's pending counts are kept by.
 */
export function familyOf(url: string | undefined): number {
  if (!url) return 3;
  // Relayer and indexer services are mounted per network: /relayer/:network/rpc/Relayer/…
  if (url.startsWith('/relayer/')) return 1;
  if (url.startsWith('/indexer/')) return 2;
  // Token metadata over webrpc, REST (/tokens/…) and its media renditions.
  if (url.startsWith('/rpc/Metadata/') || url.startsWith('/tokens/') || url.startsWith('/media/')) return 0;
  return 3;
}
