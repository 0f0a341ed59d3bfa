import { causes, findCause } from '../../util/error.ts';
/**
 * What a node's answer to eth_sendRawTransaction means, whatever its wording: geth, reth, anvil,
 * Nethermind and Besu each phrase the same conditions differently.
 */
export type SendFailure = 'known' | 'nonceTooLow' | 'nonceTooHigh' | 'underpriced' | 'insufficientFunds' | 'intrinsicGasTooLow' | 'rejected' | 'transport';

const PATTERNS: [SendFailure, RegExp][] = [
  // geth/reth/anvil "already known", Besu "Known transaction", Nethermind "AlreadyKnown", anvil "transaction already imported".
  ['known', /already known|known transaction|already imported|alreadyknown|transaction already exists|already in (the )?(mempool|pool)/i],
  // geth/reth/anvil "nonce too low", Besu "Nonce too low", Nethermind "OldNonce".
  ['nonceTooLow', /nonce too low|nonce is too low|oldnonce|nonce has already been used|noncetoolow|nonce.*(lower|less) than/i],
  // geth/anvil "nonce too high", Nethermind "NonceGap", Besu "nonce is too distant from current sender nonce".
  ['nonceTooHigh', /nonce too high|noncetoohigh|nonce ?gap|future nonce|nonce.*higher than|too distant from current sender nonce/i],
  // geth/reth "(replacement) transaction underpriced", Nethermind "FeeTooLow(ToCompete)", Besu "Gas price below configured minimum gas price".
  [
    'underpriced',
    /underpriced|replacement fee too low|replacementnotallowed|fee ?too ?low|max fee per gas less than block base fee|feecaptoolow|below configured minimum gas price|lower than (the )?current base fee/i,
  ],
  // geth/reth/anvil "insufficient funds for gas * price + value", Nethermind "InsufficientFunds", Besu "Upfront cost exceeds account balance".
  ['insufficientFunds', /insufficient ?funds|insufficient balance|not enough funds|upfront cost exceeds/i],
  // geth/Arbitrum "intrinsic gas too low" (on Arbitrum the L1 component counts), Nethermind "GasLimitBelowIntrinsicGas".
  ['intrinsicGasTooLow', /intrinsic gas too low|gaslimitbelowintrinsicgas|gas limit (is )?below intrinsic/i],
];

export function classifySendError(err: unknown): SendFailure {
  const text = errorText(err);
  for (const [kind, re] of PATTERNS) if (re.test(text)) return kind;
  // No JSON-RPC error from the node: the request may or may not have arrived.
  return isRpcResponseError(err) ? 'rejected' : 'transport';
}

export function errorText(err: unknown): string {
  const parts: unknown[] = [];
  for (const e of causes(err, 6)) parts.push(e.shortMessage ?? '', e.details ?? '', e.message ?? '');
  return parts.filter(Boolean).join(' | ');
}

function isRpcResponseError(err: unknown): boolean {
  return findCause(err, (e) => typeof e.code === 'number' && e.code !== 0 && e.name !== 'HttpRequestError' && e.name !== 'TimeoutError', 6) !== undefined;
}
