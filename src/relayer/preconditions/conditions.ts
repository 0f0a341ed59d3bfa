import { decodeFunctionResult, encodeFunctionData, parseAbi, zeroAddress, type Address, type Hex } from 'viem';
import { MULTICALL3_ADDRESS, type CallResult } from '../../chain/multicall.ts';
import { RelayError } from '../errors.ts';

/** The precondition types of the wire's TransactionPrecondition, as the v3 client's `src/preconditions` names them. */
export const PRECONDITION_TYPES = ['native-balance', 'erc20-balance', 'erc20-approval', 'erc721-ownership', 'erc721-approval', 'erc1155-balance', 'erc1155-approval'] as const;
export type PreconditionType = (typeof PRECONDITION_TYPES)[number];

/** A TransactionPrecondition as the HTTP edge parsed it (shape only; nothing about this chain checked yet). */
export interface PreconditionInput {
  type: PreconditionType;
  chainId: number;
  ownerAddress: Address;
  tokenAddress: Address;
  minAmount: bigint;
  /** metarelay extension: the wire has no token id; without it 0, as the v3 client decodes. */
  tokenId?: bigint;
  /** metarelay extension: the wire has no operator; without it ownerAddress, as the v3 client decodes. */
  operator?: Address;
}

/** A checked precondition of this chain, with every field the check needs. */
export interface Precondition {
  type: PreconditionType;
  owner: Address;
  token: Address;
  minAmount: bigint;
  tokenId: bigint;
  operator: Address;
}

const MAX_UINT256 = (1n << 256n) - 1n;

/**
 * Checks wire preconditions against this chain: same chain id, a token where the type reads one,
 * amounts within uint256, at most `max` of them. Throws InvalidArgument naming the field.
 */
export function checkPreconditions(input: PreconditionInput[], chainId: number, max: number): Precondition[] {
  if (input.length > max) throw new RelayError('invalidArgument', `preconditions: at most ${max} per meta-transaction, got ${input.length}`);
  return input.map((p, i) => {
    const at = `preconditions[${i}]`;
    if (p.chainId !== chainId) throw new RelayError('invalidArgument', `${at}.chainId: ${p.chainId} is not this relayer's chain (${chainId})`);
    if (p.type !== 'native-balance' && p.tokenAddress.toLowerCase() === zeroAddress) {
      throw new RelayError('invalidArgument', `${at}.tokenAddress: a ${p.type} precondition needs the token contract, not the zero address`);
    }
    if (p.minAmount > MAX_UINT256) throw new RelayError('invalidArgument', `${at}.minAmount: over uint256`);
    if ((p.tokenId ?? 0n) > MAX_UINT256) throw new RelayError('invalidArgument', `${at}.tokenId: over uint256`);
    return {
      type: p.type,
      owner: p.ownerAddress.toLowerCase() as Address,
      token: p.tokenAddress.toLowerCase() as Address,
      minAmount: p.minAmount,
      tokenId: p.tokenId ?? 0n,
      operator: (p.operator ?? p.ownerAddress).toLowerCase() as Address,
    };
  });
}

/** What the checker reads for one precondition (several calls for erc721-approval). */
export interface Read {
  target: Address;
  data: Hex;
}

const abi = parseAbi([
  'function getEthBalance(address addr) view returns (uint256)',
  'function balanceOf(address owner) view returns (uint256)',
  'function allowance(address owner, address spender) view returns (uint256)',
  'function ownerOf(uint256 tokenId) view returns (address)',
  'function getApproved(uint256 tokenId) view returns (address)',
  'function isApprovedForAll(address owner, address operator) view returns (bool)',
  'function balanceOf(address owner, uint256 id) view returns (uint256)',
]);

const call = (target: Address, data: Hex): Read => ({ target, data });

/** The Multicall3 sub-calls that tell whether `p` holds. */
export function readsOf(p: Precondition): Read[] {
  switch (p.type) {
    case 'native-balance':
      return [call(MULTICALL3_ADDRESS, encodeFunctionData({ abi, functionName: 'getEthBalance', args: [p.owner] }))];
    case 'erc20-balance':
      return [call(p.token, encodeFunctionData({ abi, functionName: 'balanceOf', args: [p.owner] }))];
    case 'erc20-approval':
      return [call(p.token, encodeFunctionData({ abi, functionName: 'allowance', args: [p.owner, p.operator] }))];
    case 'erc721-ownership':
      return [call(p.token, encodeFunctionData({ abi, functionName: 'ownerOf', args: [p.tokenId] }))];
    case 'erc721-approval':
      return [
        call(p.token, encodeFunctionData({ abi, functionName: 'getApproved', args: [p.tokenId] })),
        call(p.token, encodeFunctionData({ abi, functionName: 'isApprovedForAll', args: [p.owner, p.operator] })),
      ];
    case 'erc1155-balance':
      return [call(p.token, encodeFunctionData({ abi, functionName: 'balanceOf', args: [p.owner, p.tokenId] }))];
    case 'erc1155-approval':
      return [call(p.token, encodeFunctionData({ abi, functionName: 'isApprovedForAll', args: [p.owner, p.operator] }))];
  }
}

/** A call that reverted, returned nothing (no code) or returned garbage reads as "does not hold". */
function value(fn: 'getEthBalance' | 'allowance' | 'ownerOf' | 'getApproved' | 'isApprovedForAll' | 'balanceOf', r: CallResult | undefined): unknown {
  if (!r?.ok || r.data === '0x') return undefined;
  try {
    return decodeFunctionResult({ abi, functionName: fn, data: r.data } as never);
  } catch {
    return undefined;
  }
}

const atLeast = (v: unknown, min: bigint) => typeof v === 'bigint' && v >= min;
const same = (v: unknown, a: Address) => typeof v === 'string' && v.toLowerCase() === a;

/** Whether `p` holds, from the results of its `readsOf` calls (in order). */
export function holds(p: Precondition, r: CallResult[]): boolean {
  switch (p.type) {
    case 'native-balance':
      return atLeast(value('getEthBalance', r[0]), p.minAmount);
    case 'erc20-balance':
      return atLeast(value('balanceOf', r[0]), p.minAmount);
    case 'erc20-approval':
      return atLeast(value('allowance', r[0]), p.minAmount);
    case 'erc721-ownership':
      return same(value('ownerOf', r[0]), p.owner);
    case 'erc721-approval':
      return same(value('getApproved', r[0]), p.operator) || value('isApprovedForAll', r[1]) === true;
    case 'erc1155-balance':
      return atLeast(value('balanceOf', r[0]), p.minAmount);
    case 'erc1155-approval':
      return value('isApprovedForAll', r[0]) === true;
  }
}

/** For reasons and logs: "erc20-balance of 0x… in token 0x… ≥ 100". */
export function describe(p: Precondition): string {
  switch (p.type) {
    case 'native-balance':
      return `native-balance of ${p.owner} ≥ ${p.minAmount}`;
    case 'erc20-balance':
      return `erc20-balance of ${p.owner} in ${p.token} ≥ ${p.minAmount}`;
    case 'erc20-approval':
      return `erc20-approval: allowance of ${p.owner} to ${p.operator} in ${p.token} ≥ ${p.minAmount}`;
    case 'erc721-ownership':
      return `erc721-ownership: ${p.owner} owns token ${p.tokenId} of ${p.token}`;
    case 'erc721-approval':
      return `erc721-approval: ${p.operator} may move token ${p.tokenId} of ${p.token} owned by ${p.owner}`;
    case 'erc1155-balance':
      return `erc1155-balance of ${p.owner} in token ${p.tokenId} of ${p.token} ≥ ${p.minAmount}`;
    case 'erc1155-approval':
      return `erc1155-approval: ${p.operator} is an operator of ${p.owner} on ${p.token}`;
  }
}

/** Stored form (JSON text): bigints as decimal strings. */
export function toJson(list: Precondition[]): string {
  return JSON.stringify(list.map((p) => ({ ...p, minAmount: p.minAmount.toString(), tokenId: p.tokenId.toString() })));
}

export function fromJson(text: string): Precondition[] {
  return (JSON.parse(text) as Array<Record<string, string>>).map((p) => ({
    type: p.type as PreconditionType,
    owner: p.owner as Address,
    token: p.token as Address,
    minAmount: BigInt(p.minAmount),
    tokenId: BigInt(p.tokenId),
    operator: p.operator as Address,
  }));
}
