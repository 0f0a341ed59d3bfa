// `metarelay dev`'s sample collection: the dev project hosts three tokens with pictures here, and
// a freshly deployed ERC-721 points its base URI at the collection, so GetTokenMetadata on that
// contract shows collection-hosted metadata out of the box.

import sharp from 'sharp';
import type { Address } from 'viem';
import { privateKeyToAccount } from 'viem/accounts';
import type { CollectionsService } from '../collections/index.ts';
import { ANVIL_DEPLOYER_KEY, devPublicClient, devWalletClient, type Artifacts } from '../devchain/index.ts';

const NAME = 'Dev Collection';
const TOKENS = [
  { tokenId: '1', name: 'Ruby', color: '#c0392b' },
  { tokenId: '2', name: 'Emerald', color: '#27ae60' },
  { tokenId: '3', name: 'Sapphire', color: '#2471a3' },
];

export interface DevCollection {
  id: number;
  contract: Address;
  tokens: string[];
  holder: Address;
  tokenMetadataURI: string;
  contractMetadataURI: string;
}

/** A square of one colour with a lighter facet: enough to tell the tokens apart in the console. */
function picture(color: string): Promise<Buffer> {
  const svg = `<svg xmlns="http://www.w3.org/2000/svg" width="256" height="256"><rect width="256" height="256" fill="${color}"/><polygon points="128,40 216,128 128,216 40,128" fill="#ffffff" fill-opacity="0.35"/></svg>`;
  return sharp(Buffer.from(svg)).png().toBuffer();
}

/**
 * The dev project's sample collection (made once, kept across starts in the database), published, and
 * an ERC-721 on the new dev chain whose tokens 1-3 (held by `holder`) point at it, linked to it.
 */
export async function devCollection(o: { collections: CollectionsService; projectId: number; rpcUrl: string; chainId: number; artifacts: Artifacts; holder: Address }): Promise<DevCollection> {
  const actor = { projectId: o.projectId };
  const svc = o.collections;
  const existing = (await svc.list(actor, undefined, 0, 100)).items.find((c) => c.metadata.name === NAME);
  const collection = existing ?? (await svc.create(actor, undefined, { name: NAME, description: 'Token metadata and pictures hosted by metarelay (docs/collections.md).' }, true));
  for (const t of TOKENS) {
    if (existing && (await svc.token(actor, undefined, collection.id, t.tokenId).catch(() => undefined))) continue;
    await svc.createToken(
      actor,
      undefined,
      collection.id,
      t.tokenId,
      { name: t.name, description: `${t.name}, from the dev collection.`, attributes: [{ trait_type: 'Colour', value: t.name }] },
      false,
    );
    const asset = await svc.createAsset(actor, undefined, { collectionId: collection.id, tokenId: t.tokenId, metadataField: 'image', filename: `${t.name.toLowerCase()}.png` });
    await svc.upload(actor, undefined, { collectionId: collection.id, tokenId: t.tokenId, assetId: asset.id }, await picture(t.color), `${t.name.toLowerCase()}.png`);
  }
  await svc.publish(actor, undefined, collection.id, true, false);
  const uris = svc.baseURIs(collection);

  const account = privateKeyToAccount(ANVIL_DEPLOYER_KEY);
  const pub = devPublicClient(o.rpcUrl, o.chainId);
  const wallet = devWalletClient(o.rpcUrl, o.chainId, account);
  const a = o.artifacts.DevERC721;
  if (!a) throw new Error('artifact DevERC721 missing');
  const hash = await wallet.deployContract({ abi: a.abi, bytecode: a.bytecode, args: ['Dev Collection', 'DEVC', uris.tokenMetadataURI, uris.contractMetadataURI] });
  const deployed = await pub.waitForTransactionReceipt({ hash, pollingInterval: 100 });
  const contract = deployed.contractAddress!.toLowerCase() as Address;
  // The mints go out together (explicit nonces), so they share a block rather than wait one each.
  const nonce = await pub.getTransactionCount({ address: account.address, blockTag: 'pending' });
  const mints = await Promise.all(
    TOKENS.map((t, i) => wallet.writeContract({ address: contract, abi: a.abi, functionName: 'mint', args: [o.holder, BigInt(t.tokenId)], nonce: nonce + i, gas: 200_000n })),
  );
  const receipts = await Promise.all(mints.map((h) => pub.waitForTransactionReceipt({ hash: h, pollingInterval: 100 })));
  if (receipts.some((r) => r.status !== 'success')) throw new Error('minting the dev collection tokens reverted');
  await svc.link(actor, undefined, { chainId: o.chainId, contractAddress: contract, collectionId: collection.id });
  return { id: collection.id, contract, tokens: TOKENS.map((t) => t.tokenId), holder: o.holder, ...uris };
}
