// What kind of token contract an address is, asked once per process and contract: its standard
// (ERC721, ERC1155, or UNKNOWN: read tokenURI, then uri) and, for ERC1155, the `{id}` spelling its
// origin answers to. Kept in the token store for a day.

import type { Address } from 'viem';
import type { ChainClient } from '../../chain/client.ts';
import { detectStandards, type TokenStandard } from './chain-reader.ts';
import type { TokenStore } from './token-store.ts';
import type { TokenMetadataDeps } from './resolver-types.ts';

const ONE_DAY_MS = 86_400_000;

/** Per contract: its standard and, for ERC1155, the `{id}` spelling its origin answers to. */
export interface ContractKindState {
  standard: TokenStandard;
  idVariant: number | null;
}

export class ContractKinds {
  private readonly kinds = new Map<string, Promise<ContractKindState>>();

  constructor(private readonly d: { store: TokenStore; detectStandard?: TokenMetadataDeps['detectStandard'] }) {}

  of(chain: ChainClient, contract: Address): Promise<ContractKindState> {
    const k = `${chain.chainId}:${contract}`;
    let p = this.kinds.get(k);
    if (!p) {
      p = (async () => {
        const known = await this.d.store.contractKind(chain.chainId, contract);
        const fresh = known?.typeCheckedAt && Date.now() - known.typeCheckedAt.getTime() < ONE_DAY_MS;
        if (known && fresh && (known.type === 'ERC721' || known.type === 'ERC1155')) {
          return { standard: known.type, idVariant: known.idVariant };
        }
        const answer = this.d.detectStandard ? await this.d.detectStandard(chain, contract) : (await detectStandards(chain, [contract])).get(contract);
        // ERC20 and plain contracts have no token URIs: read them as UNKNOWN (tokenURI, then uri).
        const detected: TokenStandard = answer === 'ERC721' || answer === 'ERC1155' ? answer : 'UNKNOWN';
        await this.d.store.saveContractKind(chain.chainId, contract, detected);
        return { standard: detected, idVariant: known?.idVariant ?? null };
      })();
      // An UNKNOWN answer is not pinned: an address without code yet (asked before its deployment,
      // or read from a lagging node) is detected again by the next resolution instead of being
      // treated as UNKNOWN for the life of the process.
      const entry = p;
      entry.then(
        (kind) => {
          if (kind.standard === 'UNKNOWN' && this.kinds.get(k) === entry) this.kinds.delete(k);
        },
        () => {
          if (this.kinds.get(k) === entry) this.kinds.delete(k);
        },
      );
      this.kinds.set(k, p);
    }
    return p;
  }
}
