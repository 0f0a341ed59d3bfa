import { decodeFunctionResult, encodeFunctionData, hexToString, keccak256, parseAbi, type Address, type Hex } from 'viem';
import type { ChainClient } from '../../chain/client.ts';
import { multicall, type Call, type CallResult } from '../../chain/multicall.ts';
import { IFACE_ERC1155, IFACE_ERC721 } from '../tokens/chain-reader.ts';

const abi = parseAbi([
  'function supportsInterface(bytes4 id) view returns (bool)',
  'function name() view returns (string)',
  'function symbol() view returns (string)',
  'function decimals() view returns (uint8)',
  'function totalSupply() view returns (uint256)',
  'function balanceOf(address owner) view returns (uint256)',
  'function contractURI() view returns (string)',
]);

/** bytes32(uint256(keccak256('eip1967.proxy.implementation')) - 1) */
export const EIP1967_IMPLEMENTATION_SLOT = '0x360894a13ba1a3210667c828492db98dca3e2076cc3735a920a3ca505d382bbc';
const PROBE_OWNER: Address = '0x000000000000000000000000000000000000dEaD';

export type ContractType = 'ERC20' | 'ERC721' | 'ERC1155' | 'UNKNOWN';

/** What the chain says about a contract: the chain layer of its info. */
export interface ChainLayer {
  type: ContractType;
  deployed: boolean;
  bytecodeHash: Hex;
  name: string | null;
  symbol: string | null;
  decimals: number | null;
  totalSupply: string | null;
  contractURI: string | null;
  implementation: Address | null;
}

const PER_CONTRACT = 8;

function probeCalls(a: Address): Call[] {
  return [
    { target: a, data: encodeFunctionData({ abi, functionName: 'supportsInterface', args: [IFACE_ERC721] }) },
    { target: a, data: encodeFunctionData({ abi, functionName: 'supportsInterface', args: [IFACE_ERC1155] }) },
    { target: a, data: encodeFunctionData({ abi, functionName: 'name' }) },
    { target: a, data: encodeFunctionData({ abi, functionName: 'symbol' }) },
    { target: a, data: encodeFunctionData({ abi, functionName: 'decimals' }) },
    { target: a, data: encodeFunctionData({ abi, functionName: 'totalSupply' }) },
    { target: a, data: encodeFunctionData({ abi, functionName: 'contractURI' }) },
    { target: a, data: encodeFunctionData({ abi, functionName: 'balanceOf', args: [PROBE_OWNER] }) },
  ];
}

const isWord = (r: CallResult) => r.ok && r.data.length === 66;
const isTrue = (r: CallResult) => isWord(r) && BigInt(r.data) === 1n;

/** A string, or the bytes32 that old tokens (MKR, SAI) return, with trailing NULs dropped. */
export function decodeStringish(r: CallResult): string | null {
  if (!r.ok || r.data === '0x') return null;
  if (r.data.length === 66) {
    const text = hexToString(r.data as Hex).replace(/\0+$/, '');
    // A bytes32 that is not text (a number, say) is no name.
    return /^[\x20-\x7e\u00a0-\uffff]*$/.test(text) ? text : null;
  }
  try {
    return decodeFunctionResult({ abi, functionName: 'name', data: r.data }) as string;
  } catch {
    return null;
  }
}

function decodeUint(r: CallResult): bigint | null {
  return isWord(r) ? BigInt(r.data) : null;
}

function classify(res: CallResult[]): ContractType {
  if (isTrue(res[1])) return 'ERC1155';
  if (isTrue(res[0])) return 'ERC721';
  // ERC20 has no ERC165 id: it is recognised by behaving like one.
  const decimals = decodeUint(res[4]);
  if (decimals !== null && decimals <= 255n && decodeUint(res[5]) !== null && decodeUint(res[7]) !== null) return 'ERC20';
  return 'UNKNOWN';
}

function implementationFrom(slot: Hex | undefined): Address | null {
  if (!slot || BigInt(slot) === 0n) return null;
  return `0x${slot.slice(-40)}` as Address;
}

/**
 * Reads the chain layer of many contracts in one HTTP round trip: a JSON-RPC batch holding
 * one aggregate3 (eight probes per contract) and the eth_getCode of each. Only a contract still
 * UNKNOWN costs more: its EIP-1967 slot, then its implementation's ERC165 answers.
 */
export async function readContracts(chain: ChainClient, addresses: Address[]): Promise<Map<Address, ChainLayer>> {
  const calls = addresses.flatMap(probeCalls);
  const [results, codes] = await Promise.all([multicall(chain, calls, { chunkSize: calls.length }), Promise.all(addresses.map((address) => chain.public.getCode({ address })))]);
  const out = new Map<Address, ChainLayer>();
  addresses.forEach((a, i) => {
    const res = results.slice(i * PER_CONTRACT, (i + 1) * PER_CONTRACT);
    const code = codes[i] ?? '0x';
    const deployed = code !== '0x';
    const decimals = decodeUint(res[4]);
    const layer: ChainLayer = {
      type: deployed ? classify(res) : 'UNKNOWN',
      deployed,
      bytecodeHash: deployed ? keccak256(code) : '0x',
      name: deployed ? decodeStringish(res[2]) : null,
      symbol: deployed ? decodeStringish(res[3]) : null,
      decimals: deployed && decimals !== null && decimals <= 255n ? Number(decimals) : null,
      totalSupply: deployed ? (decodeUint(res[5])?.toString() ?? null) : null,
      contractURI: deployed ? decodeStringish(res[6]) : null,
      implementation: null,
    };
    out.set(a, layer);
  });
  const unknown = addresses.filter((a) => out.get(a)!.deployed && out.get(a)!.type === 'UNKNOWN');
  const slots = await Promise.all(unknown.map((address) => chain.public.getStorageAt({ address, slot: EIP1967_IMPLEMENTATION_SLOT })));
  const proxies: Address[] = [];
  unknown.forEach((a, i) => {
    const impl = implementationFrom(slots[i]);
    if (impl) {
      out.get(a)!.implementation = impl;
      proxies.push(a);
    }
  });
  if (proxies.length) {
    const impls = proxies.map((p) => out.get(p)!.implementation!);
    const r = await multicall(
      chain,
      impls.flatMap((impl) => probeCalls(impl).slice(0, 2)),
    );
    proxies.forEach((p, i) => {
      const t = isTrue(r[2 * i + 1]) ? 'ERC1155' : isTrue(r[2 * i]) ? 'ERC721' : null;
      if (t) out.get(p)!.type = t;
    });
  }
  return out;
}
