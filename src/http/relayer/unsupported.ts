import type { z } from 'zod';
import { RelayerErrors } from '../core/errors.ts';
import type { MethodDef } from '../core/webrpc.ts';
import { refusedMethodDefs } from '../health/status-methods.ts';

/**
 * Relayer methods of the schema metarelay refuses, each with why and what to use instead: a client gets a
 * clear answer, never a call accepted and ignored. Arguments are not read (their shapes are Sequence's).
 */
const REFUSED: Record<string, string> = {
  RepairSender:
    'RepairSender is not offered: the engine repairs its senders itself (each head: receipts, fee-bumped replacements, re-broadcasts, gap fills, reorgs — docs/relayer.md); stop a sender with StopSender, and StartSender it again',
  ResetSender:
    'ResetSender is not offered: a sender ledger is never deleted (every signed transaction is recorded before broadcast, so a reset could sign a second transaction at a nonce already used); stop a sender with StopSender',
  UpdateMetaTxnGasLimits:
    'UpdateMetaTxnGasLimits is not offered (deprecated in the Sequence schema): the relayer sizes the gas limit it signs from its own simulation at intake and prices the fee for it (docs/relayer-worst-case.md); send the bundle with FeeOptions and SendMetaTxn',
  GetMetaTxnNetworkFeeOptions: 'GetMetaTxnNetworkFeeOptions is not offered (deprecated in the Sequence schema, v3 payloads): ask FeeOptions with the wallet, the entrypoint and the calldata',
};
export const REFUSED_ADMIN_METHODS = ['RepairSender', 'ResetSender'];

export function refusedMethods(): Record<string, MethodDef<z.ZodType>> {
  return refusedMethodDefs(REFUSED, RelayerErrors.MethodNotFound);
}
