import type { Hex } from 'viem';
import { causes, errorText, findCause } from '../util/error.ts';
import { CallBudgetError } from './call-budget.ts';

/**
 * What a failed node call means, decided in one place. viem wraps a failure several times
 * (ContractFunctionExecutionError → CallExecutionError → HttpRequestError → the fetch's TypeError), and
 * every node words its refusals its own way (geth, reth, anvil, Nethermind, Besu, the providers): each
 * question below looks down the whole chain with util/error.ts's one walk, so each stops at the same
 * depth, and its words are kept here beside the others'. What an outage is, by the chains' own health,
 * is outage.ts's (it needs the chains).
 */

/** viem's names for a call that got no JSON-RPC answer: the node was not reached, or did not answer in time. */
const NO_ANSWER = new Set(['HttpRequestError', 'TimeoutError', 'AbortError']);

/** Whether `err` (or one of its causes) is a 429 or a call that got no slot of a node's budget in time. */
export function isRateLimited(err: unknown): boolean {
  return findCause(err, (e) => e.status === 429 || e instanceof CallBudgetError) !== undefined;
}

/**
 * Whether the node itself refused the call with a JSON-RPC error (an answer carrying a code), as opposed
 * to a transport failure on the way, which says nothing of what was asked (a block, a transaction).
 */
export function refusedByNode(err: unknown): boolean {
  let coded = false;
  for (const e of causes(err)) {
    // An HTTP error status (a 429, a 502) carries no verdict on what was asked, whatever its body says.
    if (typeof e.name === 'string' && NO_ANSWER.has(e.name)) return false;
    if (typeof e.code === 'number') coded = true;
  }
  return coded;
}

/** The node is unreachable, slow or failing (5xx): asking it more (a batch split in two) would only multiply the failures. */
export function isTransportFailure(err: unknown): boolean {
  for (const cur of causes(err) as Generator<{ name?: string; status?: number }>) {
    if (cur.name === 'TimeoutError') return true;
    if (cur.name === 'HttpRequestError' && (cur.status === undefined || cur.status >= 500) && cur.status !== 413) return true;
  }
  return false;
}

/** A call's revert data (`0x` when it reverted without any): a revert is the call's answer; anything else, undefined. */
export function revertData(err: unknown): Hex | undefined {
  for (const cur of causes(err) as Generator<{ name?: string; data?: unknown; details?: string }>) {
    if (cur.name === 'CallExecutionError' || cur.name === 'ContractFunctionRevertedError' || cur.name === 'ExecutionRevertedError') {
      return typeof cur.data === 'string' ? (cur.data as Hex) : '0x';
    }
    if (typeof cur.details === 'string' && /revert/i.test(cur.details)) return '0x';
  }
  return undefined;
}

/** A node behind the block asked (geth, erigon and providers' words): it says nothing of the range or block either. */
const BEHIND = /beyond (?:the )?current head|header not found|unknown block|block not found|after last accepted block/i;

/** The node said it is behind the blocks asked for (BEHIND), in the error or one of its causes. */
export function saysBehind(err: unknown): boolean {
  return findCause(err, (e) => (typeof e.details === 'string' && BEHIND.test(e.details)) || (typeof e.message === 'string' && BEHIND.test(e.message))) !== undefined;
}

/** Words nodes use for a block whose state they no longer keep (geth, erigon, nethermind, reth, providers): a hint, never the test. */
const NO_STATE =
  /missing trie node|header not found|historical state|state (?:is )?not available|state histor|pruned|old data not available|not an archive|archive node|unknown block|required state|beyond (?:the )?(?:current )?head/i;
const RATE_LIMITED = /\b429\b|rate.?limit|too many requests|exceeded (?:the )?(?:compute|capacity|quota|request)/i;

export type StateReadFault = 'no-state' | 'rate-limited' | 'unavailable';

/** What a failed state read (eth_getCode, eth_call, eth_getBalance at a block) means, by its words (deployment-block.ts decides "no state" by behaviour). */
export function stateReadFault(err: unknown): StateReadFault {
  const text = errorText(err);
  if (RATE_LIMITED.test(text)) return 'rate-limited';
  if (NO_STATE.test(text)) return 'no-state';
  return 'unavailable';
}

/** What a node's answer to eth_sendRawTransaction means, whatever its wording. */
export type SendFailure = 'known' | 'nonceTooLow' | 'nonceTooHigh' | 'underpriced' | 'insufficientFunds' | 'intrinsicGasTooLow' | 'rejected' | 'transport';

const SEND_PATTERNS: [SendFailure, RegExp][] = [
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

/** How deep a send's failure is read (viem's wrapping of eth_sendRawTransaction is four or five deep). */
const SEND_DEPTH = 6;

export function classifySendError(err: unknown): SendFailure {
  const text = errorText(err, SEND_DEPTH);
  for (const [kind, re] of SEND_PATTERNS) if (re.test(text)) return kind;
  // No JSON-RPC error from the node: the request may or may not have arrived.
  return isRpcResponseError(err) ? 'rejected' : 'transport';
}

function isRpcResponseError(err: unknown): boolean {
  return findCause(err, (e) => typeof e.code === 'number' && e.code !== 0 && e.name !== 'HttpRequestError' && e.name !== 'TimeoutError', SEND_DEPTH) !== undefined;
}
