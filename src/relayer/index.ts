// The relayer's public entry point: what the HTTP layer, the console, the CLI and the wiring use.
export { ChainRelayer, type RelayerDeps, type SendArgs, type SendResult } from './service.ts';
export { Dispatcher } from './engine/dispatcher.ts';
export { RelayError, type RelayErrorKind } from './errors.ts';
export { RelayEvents } from './events.ts';
export { ReceiptWaiters } from './receipt-waiters.ts';
export { relayerHealth, switchSender, type HealthDeps } from './health.ts';
export { barRepo, describeBar, type Bar, type BarKind, type BarRepo } from './bars.ts';
export { metaTxnRepo, FINAL_STATUSES, type MetaTxnRepo, type MetaTxnRow, type StatusCause } from './store.ts';
export { crossingKind, type BalanceCrossing, type BalanceHook } from './engine/balance-level.ts';
export { approvedCoverage, type ApprovalRequest, type SponsorApprover } from './intake/approval.ts';
export { sponsorRepo, SponsorConflict, SponsorKind, sponsorWire, type SponsorRepo, type SponsorRule } from './intake/sponsors.ts';
export { spendCaps, type SpendCaps } from './intake/spend-caps.ts';
export { feeTokenWire } from './intake/fees.ts';
export { receiptWire } from './receipts.ts';
export { bareId } from './intake/bundle.ts';
export { inclusionStats } from './engine/attempts.ts';
export { simulateUnsigned } from './intake/simulate.ts';
export { TRANSACTION_TUPLE } from './abi.ts';
