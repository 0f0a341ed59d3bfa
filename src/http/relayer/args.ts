import { z } from 'zod';
import { PRECONDITION_TYPES, RelayError, bareId, parseAuthorization, type Authorization } from '../../relayer/index.ts';

/** An id as clients send it: with or without 0x, any case. */
export const MetaTxId = z
  .string()
  .trim()
  .regex(/^(0x)?[0-9a-fA-F]{64}$/, 'must be a 32-byte meta-transaction id (64 hex digits, 0x optional)')
  .transform(bareId);

const Address = z
  .string()
  .regex(/^0x[0-9a-fA-F]{40}$/, 'not a 20-byte 0x address')
  .transform((a) => a.toLowerCase() as `0x${string}`);
/** The wire's one bigint: a decimal string (webrpc), or a JSON number / 0x hex as lenient clients send it. */
const Amount = z
  .union([
    z.number().int().nonnegative().refine(Number.isSafeInteger, 'a number above 2^53 loses precision: send a decimal string'),
    z
      .string()
      .trim()
      .regex(/^(0x[0-9a-fA-F]+|\d+)$/, 'must be a decimal (or 0x hex) integer string'),
  ])
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

/**
 * EIP-7702 (MetaTxn.authorization): parsed field by field (docs/relayer-7702.md); null is "not sent".
 * SendMetaTxn takes it in `call.authorization` (the wire type) or at the top level, not both differently.
 */
export function authorizationArg(fields: Record<string, unknown>): Authorization | null {
  const found = Object.entries(fields)
    .map(([field, value]) => parseAuthorization(field, value))
    .filter((a): a is Authorization => a !== null);
  if (found.length > 1 && JSON.stringify(found[0]) !== JSON.stringify(found[1])) {
    throw new RelayError('invalidArgument', `${Object.keys(fields).join(' and ')}: two different authorizations; send one`);
  }
  return found[0] ?? null;
}

/**
 * An admin method's arguments as Sequence's servers read them: fields the schema does not know are
 * ignored (a newer client adding one keeps working), known fields of a wrong type are refused. The
 * ignored names come back with the parsed arguments, for answers that move money or rules to list them
 * (`ignoredFields`): an operator who misspelt a cap sees it was not applied.
 */
export function lenient<Shape extends z.ZodRawShape>(shape: Shape) {
  return z
    .object(shape)
    .loose()
    .transform((a) => {
      const known = new Set(Object.keys(shape));
      const ignoredFields = Object.keys(a).filter((k) => !known.has(k));
      const kept = Object.fromEntries(Object.entries(a).filter(([k]) => known.has(k))) as z.infer<z.ZodObject<Shape>>;
      return { args: kept, ignoredFields };
    });
}

/** `ignoredFields` for an answer, only when some were. */
export const ignoredWire = (ignoredFields: string[]) => (ignoredFields.length ? { ignoredFields } : {});
