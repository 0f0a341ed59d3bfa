import type { Address } from 'viem';
import type { MetaTxnRepo, QueueLimits } from '../../src/relayer/store.ts';

type BeforeCommit = Parameters<MetaTxnRepo['insert']>[2];

/**
 * Puts a sponsored meta-transaction of one bundle straight into the queue, as intake would have stored
 * it: for tests of the engine's reads and claims, where how it got there does not matter (with `limits`,
 * within the queue's shares, as intake inserts it; with `beforeCommit`, on the transaction that writes it, as
 * intake's charge is).
 */
export function queueRow(
  repo: MetaTxnRepo,
  chainId: number,
  row: { id: string; wallet: Address; nonce: bigint; keyId?: number; clientIp?: string; projectId?: number },
  limits?: QueueLimits,
  beforeCommit?: BeforeCommit,
) {
  return repo.insert(
    {
      chainId,
      id: row.id,
      projectId: row.projectId ?? null,
      wallet: row.wallet,
      entrypoint: row.wallet,
      input: '0x',
      gasLimit: 100_000n,
      gasEstimated: 50_000n,
      sponsored: true,
      sponsorId: null,
      feeToken: null,
      feeValue: null,
      feePayer: null,
      keyId: row.keyId ?? null,
      clientIp: row.clientIp ?? null,
      bundles: [{ id: row.id, wallet: row.wallet, space: 0n, nonce: row.nonce }],
    },
    limits,
    beforeCommit,
  );
}
