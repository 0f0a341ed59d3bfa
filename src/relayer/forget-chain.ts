// A dev chain is new on every `metarelay dev` start (a fresh anvil with the same chain id), so the
// relayer's record of the previous one describes transactions, nonces and senders that no longer
// exist: kept, its queue would be replayed on the new chain and its nonce ledger would be wrong.

import type { Db } from '../store/db.ts';

/**
 * Chain-scoped relayer tables, children first (meta_txn_bundles references meta_txns). Projects,
 * access keys and sponsorship rules are not chain state and stay. Bars proved by the previous chain's
 * meta-transactions go with it (the dev wallets and signers are the same on every start).
 */
const CHAIN_TABLES = ['meta_txn_waits', 'meta_txn_bundles', 'meta_txns', 'relay_txs', 'relay_senders', 'relay_instances', 'relay_bars'] as const;

/** Drops everything the relayer knows about a chain. Run it before the dispatchers start. */
export async function forgetRelayerChain(db: Db, chainId: number): Promise<void> {
  await db.transaction(async (tx) => {
    for (const table of CHAIN_TABLES) await tx.query(`DELETE FROM ${table} WHERE chain_id = $1`, [chainId]);
  });
}
