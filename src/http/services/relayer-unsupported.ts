import type { z } from 'zod';
import { RelayerErrors } from '../errors.ts';
import type { MethodDef } from '../webrpc.ts';
import { refusedMethodDefs } from './common.ts';

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
// Sequence's ecosystems (a group of projects sharing sponsorships) do not exist here: a rule belongs to one project.
const NO_ECOSYSTEMS = 'metarelay has no ecosystems: a gas sponsor belongs to one project (ListGasSponsors, AddGasSponsor, UpdateGasSponsor, RemoveGasSponsor with its projectId)';
for (const m of ['List', 'Get', 'Add', 'Update', 'Remove'])
  REFUSED[`${m}EcosystemGasSponsor${m === 'List' ? 's' : ''}`] = `${m}EcosystemGasSponsor${m === 'List' ? 's' : ''} is not offered: ${NO_ECOSYSTEMS}`;

export const REFUSED_ADMIN_METHODS = [
  'RepairSender',
  'ResetSender',
  'ListEcosystemGasSponsors',
  'GetEcosystemGasSponsor',
  'AddEcosystemGasSponsor',
  'UpdateEcosystemGasSponsor',
  'RemoveEcosystemGasSponsor',
];

export function refusedMethods(): Record<string, MethodDef<z.ZodType>> {
  return refusedMethodDefs(REFUSED, RelayerErrors.MethodNotFound);
}
