import type { Queryable } from '../store/db.ts';
import type { ContractChange, ContractRow } from '../metadata/index.ts';
import { appendEventsCounting, type EventBell } from './outbox.ts';

/**
 * The contract store's hook: one contract.info_updated per contract whose stored ContractInfo
 * changed (a re-read that finds the same writes none), on the transaction that stored it, with the
 * ContractInfo a GetContractInfo would answer (`info`, built by the wiring).
 */
export function contractInfoEvents(bell: EventBell, info: (chainId: number, row: ContractRow) => unknown) {
  return async (q: Queryable, changes: ContractChange[]) => {
    const { deliveries } = await appendEventsCounting(
      q,
      changes.map((c) => ({
        type: 'contract.info_updated' as const,
        chainId: c.chainId,
        projectId: null,
        subject: `contract:${c.chainId}:${c.address}`,
        data: { chainId: c.chainId, contractAddress: c.address, changed: c.fields.map((f) => WIRE_NAMES[f] ?? f), info: info(c.chainId, c.row) },
      })),
    );
    bell.ring(deliveries > 0);
  };
}

const WIRE_NAMES: Record<string, string> = { logo_uri: 'logoURI', bytecode_hash: 'bytecodeHash' };
