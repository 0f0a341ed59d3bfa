import { z } from 'zod';
import { PRECONDITION_TYPES, RelayError } from '../../relayer/index.ts';

const Address = z
  .string()
  .regex(/^0x[0-9a-fA-F]{40}$/, 'not a 20-byte 0x address')
  .transform((a) => a.toLowerCase() as `0x${string}`);
/** The wire's one bigint: a decimal string (webrpc), or a JSON number / 0x hex as lenient clients send it. */
const Amount = z
  .union([z.number().int().nonnegative().refine(Number.isSafeInteger, 'a number above 2^53 loses precision: send a decimal string'), z.string().trim().regex(/^(0x[0-9a-fA-F]+|\d+)$/, 'must be a decimal (or 0x hex) integer string')])
  .transform((v) => BigInt(v));

/**
 * TransactionPrecondition {type, chainId, ownerAddress, tokenAddress, minAmount} (webrpc; the v3 client's
 * `src/preconditions` encoding), plus metarelay's optional `tokenId` and `operator`, which the wire lacks.
 * Strict: a misspelt field is refused, not ignored.
 */
export const TransactionPrecondition = z
  .object({
    type: z.enum(PRECONDITION_TYPES, { error: `must be one of ${PRECONDITION_TYPES.join(', ')}` }),
    chainId: z.number().int().positive(),
    ownerAddress: Address,
    /** Not read for native-balance (the zero address, or left out). */
    tokenAddress: Address.optional().transform((a) => a ?? ('0x0000000000000000000000000000000000000000' as const)),
    minAmount: Amount,
    tokenId: Amount.optional(),
    operator: Address.optional(),
  })
  .strict();

/** A missing key and null are the same on the wire (the Go client sends null). */
export const Preconditions = z.array(TransactionPrecondition).max(64).nullish();

/** EIP-7702 authorizations are not relayed yet: say so, naming the field, rather than ignore one. */
export function refuseAuthorization(field: string, value: unknown) {
  if (value === undefined || value === null) return;
  throw new RelayError(
    'invalidArgument',
    `${field}: EIP-7702 authorizations are not supported by this relayer (a bundle for a delegated EOA is not relayed); send the call without it`,
  );
}
