import { decodeFunctionData, parseAbi, type Abi, type Address, type Hex } from 'viem';
import { decodeCall } from '../relayer/intake/bundle.ts';
import { parseDecimal } from '../prices/index.ts';
import type { ChainRelayer, MetaTxnRow } from '../relayer/index.ts';

/*
 * What the activity page shows of one meta-transaction beyond its row: the calls it makes, decoded
 * where the ABI is known, and what its gas cost in the native token and in fee tokens. Read-only and
 * best effort: a call that does not decode is shown as its selector and size, never an error.
 */

/**
 * The ABIs the console names calls by: the token standards (ERC-20, ERC-721, ERC-1155) and the
 * contracts metarelay ships (its dev tokens' mint). Tried in order: the first that decodes names it.
 */
const KNOWN: { standard: string; abi: Abi }[] = [
  {
    standard: 'ERC20',
    abi: parseAbi([
      'function transfer(address to, uint256 amount) returns (bool)',
      'function approve(address spender, uint256 amount) returns (bool)',
      'function transferFrom(address from, address to, uint256 amount) returns (bool)',
    ]),
  },
  {
    standard: 'ERC721',
    abi: parseAbi([
      'function safeTransferFrom(address from, address to, uint256 tokenId)',
      'function safeTransferFrom(address from, address to, uint256 tokenId, bytes data)',
      'function setApprovalForAll(address operator, bool approved)',
    ]),
  },
  {
    standard: 'ERC1155',
    abi: parseAbi([
      'function safeTransferFrom(address from, address to, uint256 id, uint256 amount, bytes data)',
      'function safeBatchTransferFrom(address from, address to, uint256[] ids, uint256[] amounts, bytes data)',
    ]),
  },
  {
    standard: 'metarelay dev token',
    abi: parseAbi(['function mint(address to, uint256 amountOrId)', 'function mint(address to, uint256 id, uint256 amount)']),
  },
];

export interface CallArg {
  name: string;
  type: string;
  /** The value as text (integers in full, addresses checksummed as given). */
  value: string;
  /** An ERC-20 amount in the token's units and symbol, where the target is a token the service knows. */
  display?: string;
}

export interface DecodedCallWire {
  /** The wallet (or guest module) making the call. */
  from: string;
  target: string;
  valueWei: string;
  /** `transfer(address,uint256)` style, null when no known ABI decodes it. */
  signature: string | null;
  functionName: string | null;
  /** Which known ABI named it: ERC20, ERC721, ERC1155 or a contract metarelay ships. */
  standard: string | null;
  args: CallArg[];
  /** The first 4 bytes, and the calldata's size in bytes. */
  selector: string;
  dataBytes: number;
  /** What the target is known as: a fee token's symbol. */
  targetName: string | null;
}

/** A decimal string of base units in a token's units ("40000" with 6 decimals → "0.04"). */
export function unitsOf(amount: bigint, decimals: number): string {
  const neg = amount < 0n;
  const a = neg ? -amount : amount;
  const base = 10n ** BigInt(decimals);
  const frac = decimals ? (a % base).toString().padStart(decimals, '0').replace(/0+$/, '') : '';
  return `${neg ? '-' : ''}${(a / base).toLocaleString('en-US')}${frac ? `.${frac}` : ''}`;
}

const AMOUNT_ARGS = new Set(['amount', 'amountOrId']);

/** Each call the meta-transaction makes, outermost wallet first, decoded where a known ABI fits. */
export function decodedCalls(relayer: ChainRelayer, row: Pick<MetaTxnRow, 'wallet' | 'entrypoint' | 'input'>): DecodedCallWire[] | null {
  let leaves;
  try {
    leaves = decodeCall(relayer.chainId, relayer.context, row.wallet as Address, row.entrypoint as Address, row.input as Hex).leaves;
  } catch {
    return null;
  }
  const tokens = new Map(relayer.feeTokens.filter((t) => t.address).map((t) => [t.address!.toLowerCase(), t]));
  return leaves.map((l) => {
    const token = tokens.get(l.target.toLowerCase());
    const base: DecodedCallWire = {
      from: l.executor,
      target: l.target,
      valueWei: l.value.toString(),
      signature: null,
      functionName: null,
      standard: null,
      args: [],
      selector: l.data.length >= 10 ? l.data.slice(0, 10) : l.data,
      dataBytes: (l.data.length - 2) / 2,
      targetName: token ? token.symbol : null,
    };
    for (const k of KNOWN) {
      try {
        const d = decodeFunctionData({ abi: k.abi, data: l.data });
        const fn = (k.abi as readonly { type: string; name?: string; inputs?: readonly { name?: string; type: string }[] }[]).find(
          (x) => x.type === 'function' && x.name === d.functionName && (x.inputs?.length ?? 0) === (d.args?.length ?? 0),
        )!;
        const inputs = fn.inputs ?? [];
        return {
          ...base,
          functionName: d.functionName,
          signature: `${d.functionName}(${inputs.map((i) => i.type).join(',')})`,
          // An ERC-20 transfer and a dev token's mint are told apart by the target: a known fee token is ERC-20.
          standard: token && k.standard === 'metarelay dev token' ? 'ERC20' : k.standard,
          args: inputs.map((input, i) => {
            const v = (d.args ?? [])[i];
            const value = Array.isArray(v) ? `[${v.map(String).join(', ')}]` : String(v);
            const name = input.name ?? `arg${i}`;
            const amount = token && typeof v === 'bigint' && AMOUNT_ARGS.has(name) ? `${unitsOf(v, token.decimals)} ${token.symbol}` : undefined;
            return { name: token && name === 'amountOrId' ? 'amount' : name, type: input.type, value, ...(amount ? { display: amount } : {}) };
          }),
        };
      } catch {
        // Not this ABI: the next one.
      }
    }
    return base;
  });
}

export interface CostWire {
  gasUsed: number;
  gasPriceWei: string;
  /** gas used × the effective gas price (plus an OP-stack chain's L1 data fee). */
  wei: string;
  /** The same in fee tokens at their price now: `amount` in the token's units. */
  inTokens: { symbol: string; amount: string; nativePrice: string; source: string }[];
}

/** What the meta-transaction's gas cost, in the native token and in each priced fee token (its own first). */
export async function costOf(relayer: ChainRelayer, row: MetaTxnRow): Promise<CostWire | null> {
  if (!row.gas_used || !row.gas_price) return null;
  const wei = BigInt(row.gas_used) * BigInt(row.gas_price) + BigInt(row.l1_fee_wei ?? '0');
  const prices = await relayer.priceStatus().catch(() => null);
  const inTokens: CostWire['inTokens'] = [];
  relayer.feeTokens.forEach((t, i) => {
    const p = prices?.[i];
    if (!t.address || !p?.ok) return;
    const price = parseDecimal(p.nativePrice);
    if (price.num === 0n) return;
    // wei → token base units at `price` native per token, to the token's last decimal.
    const units = (wei * 10n ** BigInt(t.decimals) * price.den) / (price.num * 10n ** 18n);
    const entry = { symbol: t.symbol, amount: unitsOf(units, t.decimals), nativePrice: p.nativePrice, source: p.source };
    if (row.fee_token && row.fee_token.toLowerCase() === t.address.toLowerCase()) inTokens.unshift(entry);
    else inTokens.push(entry);
  });
  return { gasUsed: row.gas_used, gasPriceWei: row.gas_price, wei: wei.toString(), inTokens };
}
