import type { Db, Queryable } from '../store/db.ts';

/** Who a bar applies to: a wallet address, an access key id, or a client (IP) address. */
export type BarKind = 'wallet' | 'key' | 'ip' | 'contract';

export interface Bar {
  kind: BarKind;
  value: string;
  chainId: number;
  metaTxnId: string;
  feeToken: string | null;
  owed: string | null;
  received: string | null;
  createdAt: Date;
}

/**
 * A fee that did not arrive, or gas burnt beyond what the fee covered (feeToken null, owed = the cost in
 * wei, received = the cover in wei): who to bar, and the meta-transaction that proved it.
 */
export interface Shortfall {
  chainId: number;
  metaTxnId: string;
  wallet: string | null;
  keyId: number | null;
  clientIp: string | null;
  feeToken: string | null;
  owed: bigint;
  received: bigint;
  /** The contracts it called (a gas shortfall bars them too: the next caller of the burner pays or is sponsored). */
  contracts?: string[];
}

/**
 * The fee_token of a signer's bar for an EIP-7702 call that reached no wallet (engine/sweep.ts): no fee
 * token is involved (owed = what the call cost, in wei). Such a signer gets no further delegated call,
 * sponsored or not (service.ts).
 */
export const LOST_DELEGATION = 'eip7702';

interface BarRow {
  kind: BarKind;
  value: string;
  chain_id: string | number;
  meta_txn_id: string;
  fee_token: string | null;
  owed: string | null;
  received: string | null;
  created_at: Date | string;
}

const toBar = (r: BarRow): Bar => ({
  kind: r.kind,
  value: r.value,
  chainId: Number(r.chain_id),
  metaTxnId: r.meta_txn_id,
  feeToken: r.fee_token,
  owed: r.owed == null ? null : String(r.owed),
  received: r.received == null ? null : String(r.received),
  createdAt: new Date(r.created_at),
});

/**
 * The relayer's memory of callers that did not pay: a mined fee-paying meta-transaction whose fee did
 * not reach the payment address bars its wallet, access key and client address from fee-paid relaying
 * (the relayer fronts the gas of those). The only module that writes relay_bars.
 */
export function barRepo(db: Db) {
  return {
    /** Records the bars of each shortfall (a second shortfall of one wallet keeps the first record). */
    async record(q: Queryable, items: Shortfall[]) {
      for (const s of items) {
        const who: [BarKind, string | null][] = [
          ['wallet', s.wallet?.toLowerCase() ?? null],
          ['key', s.keyId == null ? null : String(s.keyId)],
          ['ip', s.clientIp],
          ...(s.contracts ?? []).map((c): [BarKind, string] => ['contract', c.toLowerCase()]),
        ];
        for (const [kind, value] of who) {
          if (value == null) continue;
          await q.query(
            `INSERT INTO relay_bars (kind, value, chain_id, meta_txn_id, fee_token, owed, received) VALUES ($1, $2, $3, $4, $5, $6, $7)
             ON CONFLICT (kind, value) DO NOTHING`,
            [kind, value, s.chainId, s.metaTxnId, s.feeToken, s.owed.toString(), s.received.toString()],
          );
        }
      }
    },

    /** The first bar that applies to this caller, if any. */
    async find(who: { wallet: string | null; keyId: number | null; clientIp: string | null }): Promise<Bar | undefined> {
      const r = await db.query<BarRow>(
        `SELECT * FROM relay_bars WHERE (kind = 'wallet' AND value = $1) OR (kind = 'key' AND value = $2) OR (kind = 'ip' AND value = $3)
         ORDER BY created_at LIMIT 1`,
        [who.wallet?.toLowerCase() ?? null, who.keyId == null ? null : String(who.keyId), who.clientIp],
      );
      return r.rows[0] ? toBar(r.rows[0]) : undefined;
    },

    /** The first bar on any of these contracts, if any. */
    async findContract(contracts: string[]): Promise<Bar | undefined> {
      if (contracts.length === 0) return undefined;
      const r = await db.query<BarRow>(`SELECT * FROM relay_bars WHERE kind = 'contract' AND value = ANY($1) ORDER BY created_at LIMIT 1`, [contracts.map((c) => c.toLowerCase())]);
      return r.rows[0] ? toBar(r.rows[0]) : undefined;
    },

    async list(limit = 100): Promise<Bar[]> {
      const r = await db.query<BarRow>('SELECT * FROM relay_bars ORDER BY created_at DESC LIMIT $1', [limit]);
      return r.rows.map(toBar);
    },

    /** Lifts a bar (an operator who settled with the caller). */
    async lift(kind: BarKind, value: string): Promise<boolean> {
      const r = await db.query('DELETE FROM relay_bars WHERE kind = $1 AND value = $2', [kind, value.toLowerCase()]);
      return r.rowCount > 0;
    },
  };
}
export type BarRepo = ReturnType<typeof barRepo>;

export function describeBar(b: Bar): string {
  const who = b.kind === 'wallet' ? `wallet ${b.value}` : b.kind === 'key' ? 'this access key' : b.kind === 'contract' ? `contract ${b.value}` : `client address ${b.value}`;
  if (b.feeToken === LOST_DELEGATION) {
    return `${who} is barred from relaying: its EIP-7702 call in meta-transaction ${b.metaTxnId} on chain ${b.chainId} reached no wallet (its delegation was voided or changed after the relayer's last check), costing the relayer ${b.owed} wei`;
  }
  const why = b.feeToken == null ? `burnt more gas than its fee covered (cost ${b.owed} wei, covered ${b.received} wei)` : `was mined without its fee (owed ${b.owed}, received ${b.received})`;
  return `${who} is barred from fee-paid relaying: meta-transaction ${b.metaTxnId} on chain ${b.chainId} ${why}`;
}
