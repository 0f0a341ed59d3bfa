import type { RelayerEnv } from './relayer-env.ts';

/** The statuses a meta-transaction ends in: nothing moves it on from these. */
export const FINAL_STATUSES = ['SUCCEEDED', 'FAILED', 'PARTIALLY_FAILED', 'DROPPED'];

type Caller = Pick<RelayerEnv, 'call'>;

/** The meta-transaction's receipt if it has reached a final status, else undefined (one GetMetaTxnReceipt). */
export async function finalReceiptNow(env: Caller, id: string, headers?: Record<string, string>): Promise<any> {
  const r = await env.call('GetMetaTxnReceipt', { metaTxID: id }, headers);
  return FINAL_STATUSES.includes(r.body.receipt?.status) ? r.body.receipt : undefined;
}

/**
 * Asks GetMetaTxnReceipt until the meta-transaction is final and returns its receipt. No pause between
 * asks: each one waits at the service for the receipt, so `tries` bounds the wait in those.
 */
export async function finalReceipt(env: Caller, id: string, opts: { headers?: Record<string, string>; tries?: number } = {}): Promise<any> {
  for (let i = 0; i < (opts.tries ?? 60); i++) {
    const receipt = await finalReceiptNow(env, id, opts.headers);
    if (receipt) return receipt;
  }
  throw new Error(`meta-transaction ${id} never reached a final status`);
}

/** Asks GetMetaTxnStatus every `pauseMs` until the meta-transaction is final and returns that answer. */
export async function finalStatus(env: Caller, id: string, opts: { tries?: number; pauseMs?: number } = {}): Promise<any> {
  for (let i = 0; i < (opts.tries ?? 300); i++) {
    const r = await env.call('GetMetaTxnStatus', { metaTxID: id });
    if (FINAL_STATUSES.includes(r.body?.status)) return r.body;
    await new Promise((res) => setTimeout(res, opts.pauseMs ?? 100));
  }
  throw new Error(`meta-transaction ${id} never reached a final status`);
}
