// ERC-1155 `{id}` substitution. The spec form is 64 lower-case hex digits, but
// deployed collections also serve decimal and short-hex names, so callers get
// the spec form first and the common deviations as fallbacks.

const ID_PLACEHOLDER = /\{id\}/gi;
const MAX_UINT256 = (1n << 256n) - 1n;

export function hasIdTemplate(uri: string): boolean {
  return /\{id\}/i.test(uri);
}

/** Candidate URIs in the order they should be tried; `[uri]` when there is no placeholder. */
export function expandIdTemplate(uri: string, tokenId: bigint): string[] {
  if (tokenId < 0n || tokenId > MAX_UINT256) throw new RangeError(`token id out of uint256 range: ${tokenId}`);
  if (!hasIdTemplate(uri)) return [uri];
  const hex = tokenId.toString(16);
  const padded = hex.padStart(64, '0');
  const spellings = [padded, tokenId.toString(10), hex, `0x${hex}`, `0x${padded}`];
  return [...new Set(spellings.map((id) => uri.replace(ID_PLACEHOLDER, id)))];
}
