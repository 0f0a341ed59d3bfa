// A contract is linked to a project's collection only with proof that the project controls it: a
// project could otherwise take another's contract (whose owner then meets "already linked") or queue
// refreshes for contracts it has nothing to do with. Either the contract already points at the
// collection (its contractURI, or a token's tokenURI / uri), or its owner() signed the link.

import type { Address, Hex } from 'viem';

/** The chain reads a proof needs (a viem PublicClient has both). */
export interface LinkChain {
  readContract(args: { address: Address; abi: readonly unknown[]; functionName: string; args?: readonly unknown[] }): Promise<unknown>;
  verifyMessage(args: { address: Address; message: string; signature: Hex }): Promise<boolean>;
}

export interface LinkClaim {
  projectId: number;
  chainId: number;
  contractAddress: string;
  collectionId: number;
  /** The collection's public URLs (CollectionsService.baseURIs). */
  uris: { contractMetadataURI: string; tokenMetadataURI: string };
  /** A few of the collection's token ids, to read tokenURI / uri with. */
  tokenIds: string[];
  /** The contract owner's signature of `linkChallenge(...)`. */
  ownerSignature?: string;
}

/** What the contract's owner() signs (EIP-191 personal message) to link it to a collection. */
export function linkChallenge(c: Pick<LinkClaim, 'projectId' | 'chainId' | 'contractAddress' | 'collectionId'>): string {
  return `metarelay: link contract ${c.contractAddress.toLowerCase()} on chain ${c.chainId} to collection ${c.collectionId} of project ${c.projectId}`;
}

const fn = (name: string, inputs: Array<{ name: string; type: string }>, output: string) =>
  ({ type: 'function', name, stateMutability: 'view', inputs, outputs: [{ name: '', type: output }] }) as const;
const ABI = [fn('contractURI', [], 'string'), fn('tokenURI', [{ name: 'id', type: 'uint256' }], 'string'), fn('uri', [{ name: 'id', type: 'uint256' }], 'string'), fn('owner', [], 'address')];

/** Why the claim is not proven (a sentence naming what would prove it), or null when it is. */
export async function linkRefusal(chain: LinkChain | undefined, c: LinkClaim): Promise<string | null> {
  const challenge = linkChallenge(c);
  const how = `point the contract's contractURI (or its tokens' tokenURI) at ${c.uris.contractMetadataURI} / ${c.uris.tokenMetadataURI}, or send ownerSignature: the owner()'s signature of "${challenge}"`;
  if (!chain) return `chain ${c.chainId} is not configured here, so the link cannot be proven`;
  const address = c.contractAddress as Address;
  const read = (functionName: string, args?: readonly unknown[]) => chain.readContract({ address, abi: ABI, functionName, args }).catch(() => undefined);
  const contractUri = await read('contractURI');
  if (typeof contractUri === 'string' && [c.uris.contractMetadataURI, `${c.uris.contractMetadataURI}/contract.json`].includes(contractUri.trim())) return null;
  for (const id of c.tokenIds.slice(0, 3)) {
    for (const f of ['tokenURI', 'uri']) {
      const u = await read(f, [BigInt(id)]);
      if (typeof u === 'string' && u.trim().startsWith(c.uris.tokenMetadataURI)) return null;
    }
  }
  if (c.ownerSignature === undefined) return `no proof that this project controls contract ${c.contractAddress}: ${how}`;
  const owner = await read('owner');
  if (typeof owner !== 'string') return `contract ${c.contractAddress} has no owner() to sign the link: ${how}`;
  const signed = /^0x[0-9a-fA-F]+$/.test(c.ownerSignature)
    ? await chain.verifyMessage({ address: owner as Address, message: challenge, signature: c.ownerSignature as Hex }).catch(() => false)
    : false;
  return signed ? null : `ownerSignature is not the signature of owner() ${owner} over "${challenge}"`;
}
