import type { Db, Queryable } from '../store/db.ts';

/**
 * Who a bar applies to. A fee that did not arrive bars the caller where it came from: its client network
 * under its key (`key-client`, value "<key id or none>|<network>") and its wallet under its key
 * (`key-wallet`, "<key id or none>|<wallet>"), and the contracts the bundle called; the whole key (`key`)
 * only once callers from several networks did it (keyBarAfterNetworks), so one attacker does not bar a
 * dapp's public key for all its users. `wallet` bars a signer whose EIP-7702 call reached no wallet; `ip`
 * bars are those written before (still honoured).
 */
export type BarKind = 'wallet' | 'key' | 'ip' | 'contract' | 'key-client' | 'key-wallet';

/** A key id as a bar's key part: keyless callers are "none". */
const keyPart = (keyId: number | null) => (keyId == null ? 'none' : String(keyId));
export const keyClientBar = (keyId: number | null, net: string) => `${keyPart(keyId)}|${net.toLowerCase()}`;
export const keyWalletBar = (keyId: number | null, wallet: string) => `${keyPart(keyId)}|${wallet.toLowerCase()}`;

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
  /** The client network it came from (loss-budget.ts clientNet); the address itself where none was recorded. */
  clientNet?: string | null;
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
    /**
     * Records the bars of each shortfall (a second one of the same caller keeps the first record). Returns
     * the keys barred whole because callers from `keyBarAfterNetworks` client networks of theirs did not
     * pay within a day.
     */
    async record(q: Queryable, items: Shortfall[], keyBarAfterNetworks = 3): Promise<number[]> {
      const escalated: number[] = [];
      for (const s of items) {
        const net = s.clientNet ?? s.clientIp;
        const who: [BarKind, string | null][] =
          s.feeToken === LOST_DELEGATION
            ? [['wallet', s.wallet?.toLowerCase() ?? null]]
            : [
                ['key-client', net ? keyClientBar(s.keyId, net) : null],
                ['key-wallet', s.wallet ? keyWalletBar(s.keyId, s.wallet) : null],
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
        if (s.keyId == null || s.feeToken === LOST_DELEGATION) continue;
        // Callers of one key from several networks: the key itself is out (and the operator is told).
        const r = await q.query(
          `INSERT INTO relay_bars (kind, value, chain_id, meta_txn_id, fee_token, owed, received)
           SELECT 'key', $1, $2, $3, $4, $5, $6
           WHERE (SELECT count(*) FROM relay_bars WHERE kind = 'key-client' AND starts_with(value, $1 || '|') AND created_at > now() - interval '1 day') >= $7
           ON CONFLICT (kind, value) DO NOTHING`,
          [String(s.keyId), s.chainId, s.metaTxnId, s.feeToken, s.owed.toString(), s.received.toString(), keyBarAfterNetworks],
        );
        if (r.rowCount > 0) escalated.push(s.keyId);
      }
      return escalated;
    },

    /** The first bar that applies to this caller, if any. */
    async find(who: { wallet: string | null; keyId: number | null; clientIp: string | null; clientNet?: string | null }): Promise<Bar | undefined> {
      const net = who.clientNet ?? who.clientIp;
      const r = await db.query<BarRow>(
        `SELECT * FROM relay_bars WHERE (kind = 'wallet' AND value = $1) OR (kind = 'key' AND value = $2) OR (kind = 'ip' AND value = $3)
           OR (kind = 'key-client' AND value = $4) OR (kind = 'key-wallet' AND value = $5)
         ORDER BY created_at LIMIT 1`,
        [
          who.wallet?.toLowerCase() ?? null,
          who.keyId == null ? null : String(who.keyId),
          who.clientIp,
          net ? keyClientBar(who.keyId, net) : null,
          who.wallet ? keyWalletBar(who.keyId, who.wallet) : null,
        ],
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
  const [, part] = b.value.split('|');
  const who =
    b.kind === 'wallet'
      ? `wallet ${b.value}`
      : b.kind === 'key'
        ? 'this access key'
        : b.kind === 'contract'
          ? `contract ${b.value}`
          : b.kind === 'key-client'
            ? `client ${part}`
            : b.kind === 'key-wallet'
              ? `wallet ${part}`
              : `client address ${b.value}`;
  if (b.feeToken === LOST_DELEGATION) {
    return `${who} is barred from relaying: its EIP-7702 call in meta-transaction ${b.metaTxnId} on chain ${b.chainId} reached no wallet (its delegation was voided or changed after the relayer's last check), costing the relayer ${b.owed} wei`;
  }
  const why = b.feeToken == null ? `burnt more gas than its fee covered (cost ${b.owed} wei, covered ${b.received} wei)` : `was mined without its fee (owed ${b.owed}, received ${b.received})`;
  return `${who} is barred from fee-paid relaying: meta-transaction ${b.metaTxnId} on chain ${b.chainId} ${why}`;
}
