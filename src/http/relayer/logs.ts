import type { MetaTxnRow } from '../../relayer/index.ts';

// The relayer's MetaTxnLog and legacy Transaction shapes, as GetMetaTransactions, SentTransactions and the console answer them.

export function metaTxnLog(r: MetaTxnRow, space: string | undefined) {
  return {
    id: 0,
    chainId: r.chain_id,
    projectId: r.project_id ?? 0,
    txnHash: r.txn_hash ?? '',
    txnNonce: String(r.txn_nonce ?? 0),
    metaTxnID: r.id,
    txnStatus: r.status,
    txnRevertReason: r.revert_reason ?? '',
    requeues: r.attempts,
    queuedAt: r.queued_at.toISOString(),
    sentAt: r.sent_at?.toISOString() ?? null,
    minedAt: r.mined_at?.toISOString() ?? null,
    target: r.entrypoint,
    input: r.input,
    txnArgs: {},
    txnReceipt: r.receipt ? JSON.parse(r.receipt) : null,
    walletAddress: r.wallet,
    metaTxnNonce: space ?? '0',
    gasLimit: r.gas_limit,
    gasPrice: r.gas_price ?? '0',
    gasUsed: r.gas_used ?? 0,
    gasEstimated: r.gas_estimated,
    gasFeeMarkup: null,
    usdRate: '0',
    creditsUsed: 0,
    // The sender's whole outlay: the gas, and an OP-stack chain's L1 data fee on top.
    cost: r.gas_used && r.gas_price ? (BigInt(r.gas_used) * BigInt(r.gas_price) + BigInt(r.l1_fee_wei ?? '0')).toString() : '0',
    isWhitelisted: r.sponsored,
    gasSponsor: r.sponsor_id,
    gasTank: null,
    feeToken: r.fee_token,
    feeValue: r.fee_value,
    updatedAt: r.updated_at.toISOString(),
    createdAt: r.queued_at.toISOString(),
  };
}

/** The legacy (2.2.x) Transaction shape of SentTransactions / PendingTransactions. */
export function legacyTxn(r: MetaTxnRow) {
  return {
    txnHash: r.txn_hash,
    blockNumber: r.block_number ?? 0,
    chainId: r.chain_id,
    metaTxnID: r.id,
    status: r.status,
    timestamp: (r.mined_at ?? r.sent_at ?? r.queued_at).toISOString(),
  };
}
