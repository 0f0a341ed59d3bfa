import type { OriginServer } from './origin.ts';

/** Token ids minted by deploySamples, as decimal strings. */
// A type alias, not an interface, so it stays assignable to Record<string, string[]>.
export type DevTokens = {
  erc721: string[];
  erc721OnChain: string[];
  erc1155: string[];
};

/** ERC-1155 `{id}` substitution: lowercase hex, zero-padded to 64 characters. */
export function erc1155IdHex(id: bigint | string): string {
  return BigInt(id).toString(16).padStart(64, '0');
}

export const erc721Path = (id: string) => `/erc721/${id}`;
export const erc1155Path = (id: string) => `/erc1155/${erc1155IdHex(id)}.json`;
export const imagePath = (name: string) => `/images/${name}.svg`;
export const CONTRACT_DOCUMENT_PATH = '/contract/erc721.json';

const COLORS = ['Red', 'Green', 'Blue', 'Gold', 'Violet'] as const;

export function sampleSvg(label: string, hue: number): string {
  return (
    `<svg xmlns="http://www.w3.org/2000/svg" viewBox="0 0 100 100">` +
    `<rect width="100" height="100" fill="hsl(${hue},65%,45%)"/>` +
    `<text x="50" y="57" font-size="18" font-family="monospace" text-anchor="middle" fill="#fff">${label}</text></svg>`
  );
}

export function erc721Document(originUrl: string, id: string) {
  const n = Number(id);
  return {
    name: `Dev ERC721 #${id}`,
    description: `Token ${id} of the metarelay dev collection, served by the dev origin.`,
    image: `${originUrl}${imagePath(id)}`,
    external_url: `${originUrl}${erc721Path(id)}`,
    attributes: [
      { trait_type: 'Color', value: COLORS[n % COLORS.length] },
      { trait_type: 'Level', value: n, display_type: 'number' },
    ],
  };
}

export function erc1155Document(originUrl: string, id: string) {
  return {
    name: `Dev ERC1155 #${id}`,
    description: `Multi-token ${id} of the metarelay dev collection.`,
    image: `${originUrl}${imagePath(`erc1155-${id}`)}`,
    decimals: 0,
    properties: { rarity: Number(id) === 1 ? 'common' : 'rare', edition: Number(id) },
  };
}

/** ERC-7572 contract-level metadata for the dev ERC721. */
export function contractDocument(originUrl: string) {
  return {
    name: 'Dev ERC721',
    description: 'The metarelay dev-chain NFT collection.',
    image: `${originUrl}${imagePath('collection')}`,
    banner_image: `${originUrl}${imagePath('banner')}`,
    external_link: originUrl,
  };
}

/** Serves the documents and images that the sample contracts' URIs point at. */
export function seedOriginDocuments(origin: Pick<OriginServer, 'url' | 'setDocument'>, tokens: DevTokens): void {
  const svg = { contentType: 'image/svg+xml' };
  for (const id of tokens.erc721) {
    origin.setDocument(erc721Path(id), erc721Document(origin.url, id));
    origin.setDocument(imagePath(id), sampleSvg(`#${id}`, (Number(id) * 67) % 360), svg);
  }
  for (const id of tokens.erc1155) {
    origin.setDocument(erc1155Path(id), erc1155Document(origin.url, id));
    origin.setDocument(imagePath(`erc1155-${id}`), sampleSvg(`1155 #${id}`, (Number(id) * 113) % 360), svg);
  }
  origin.setDocument(CONTRACT_DOCUMENT_PATH, contractDocument(origin.url));
  origin.setDocument(imagePath('collection'), sampleSvg('DEV', 200), svg);
  origin.setDocument(imagePath('banner'), sampleSvg('metarelay', 30), svg);
}
