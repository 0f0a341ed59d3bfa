import { describe, expect, it } from 'vitest';
import { outcomeOf } from '../src/relayer/receipts.ts';

const base = { transactionHash: '0x01', blockNumber: '0x2', blockHash: '0x03', status: '0x1' };

describe('relayer receipts', () => {
  it('a mined transaction with no wallet event is FAILED, never SUCCEEDED', () => {
    const o = outcomeOf({ ...base, logs: [] }, 'aa'.repeat(32), [{ bundle_id: 'aa'.repeat(32), wallet: '0x00' }]);
    expect(o.status).toBe('FAILED');
    expect(o.reason).toMatch(/no wallet executed/);
  });

  it('a reverted transaction is FAILED', () => {
    expect(outcomeOf({ ...base, status: '0x0', logs: [] }, 'bb'.repeat(32), []).status).toBe('FAILED');
  });
});
