// ERC-1155 `{id}` substitution. The spec form is 64 lower-case hex digits, but
// deployed collections also serve decimal and short-hex names, so callers get
// the spec form first and the common deviations as fallbacks.

const ID_PLACEHOLDER = /\{id\}/gi;
const MAX_UINT256 = (1n << 256n) - 1n;

export function hasIdTemplate(uri: string): boolean {
  return /\{id\}/i.test(uri);
}

/** The id spellings, by index: what a contract's `id_variant` remembers. */
export const ID_VARIANTS = ['hex64', 'decimal', 'hex', '0xhex', '0xhex64'] as const;

export interface IdCandidate {
  variant: number;
  uri: string;
}

/**
 * Candidate URIs in the order they should be tried, each tagged with its spelling; the
 * spelling a contract is known to use goes first. `[{variant: 0, uri}]` when there is no placeholder.
 */
export function expandIdCandidates(uri: string, tokenId: bigint, preferred?: number | null): IdCandidate[] {
  if (tokenId < 0n || tokenId > MAX_UINT256) throw new RangeError(`token id out of uint256 range: ${tokenId}`);
  if (!hasIdTemplate(uri)) return [{ variant: 0, uri }];
  const hex = tokenId.toString(16);
  const padded = hex.padStart(64, '0');
  const spellings = [padded, tokenId.toString(10), hex, `0x${hex}`, `0x${padded}`];
  const order = spellings.map((_, i) => i);
  if (preferred != null && preferred > 0 && preferred < spellings.length) order.unshift(...order.splice(preferred, 1));
  const seen = new Set<string>();
  const out: IdCandidate[] = [];
  for (const i of order) {
    const expanded = uri.replace(ID_PLACEHOLDER, spellings[i]);
    if (seen.has(expanded)) continue;
    seen.add(expanded);
    out.push({ variant: i, uri: expanded });
  }
  return out;
}

/** Candidate URIs in the order they should be tried; `[uri]` when there is no placeholder. */
export function expandIdTemplate(uri: string, tokenId: bigint): string[] {
  return expandIdCandidates(uri, tokenId).map((c) => c.uri);
}
