import { api, short, when } from '../api.ts';
import { Amount, NO_UNIT, ReadableWei, useUnits } from '../amount.tsx';
import { useAction, useApi } from '../hooks.ts';

interface FeeNetwork {
  chainId: number;
  network: string;
  isFeeRequired: boolean;
  paymentAddress: string;
  feeMarkup: number;
  tokens: { symbol: string; name: string; decimals: number; contractAddress: string | null; nativePrice: string | null; priceSource: string | null; priceError: string | null }[];
}

export function FeeTokens() {
  const d = useApi<{ networks: FeeNetwork[] }>('FeeTokens', {});
  return (
    <section>
      <h2>Fee tokens</h2>
      <p class="hint">
        From the configuration (<code>chains[].relayer.feeTokens</code>); prices are live (Chainlink feeds, Uniswap v3 TWAPs, then the fixed rate; docs/fee-prices.md) in the native currency. A token
        without a price is withdrawn from FeeOptions.
      </p>
      {d.error && <p class="error">{d.error}</p>}
      {d.data?.networks.map((n) => (
        <div class="panel">
          <h3>
            {n.network} ({n.chainId})
          </h3>
          <p>
            {n.isFeeRequired ? 'Fees required' : 'Gasless'} · paid to <code class="wrap">{n.paymentAddress}</code> · markup ×{n.feeMarkup}
          </p>
          <table class="reflow" data-testid={`fees-${n.network}`}>
            <thead>
              <tr>
                <th>Symbol</th>
                <th>Name</th>
                <th>Decimals</th>
                <th>Contract</th>
                <th>Price (native per token)</th>
                <th>Source</th>
              </tr>
            </thead>
            <tbody>
              {n.tokens.map((t) => (
                <tr>
                  <td data-label="Symbol">{t.symbol}</td>
                  <td data-label="Name">{t.name}</td>
                  <td data-label="Decimals">{t.decimals}</td>
                  <td data-label="Contract">
                    <code>{t.contractAddress ?? 'native'}</code>
                  </td>
                  <td data-label="Price (native per token)">{t.nativePrice ?? <span class="error">withdrawn</span>}</td>
                  <td data-label="Source">{t.priceSource ?? t.priceError}</td>
                </tr>
              ))}
            </tbody>
          </table>
        </div>
      ))}
    </section>
  );
}

interface SenderRow {
  index: number;
  address: string;
  etherBalance: number | null;
  balanceWei: string | null;
  nonce: { chain: number | null; mempool: number | null };
  /** false: the node did not answer; the balance and nonces are the last read, at readAt. */
  live: boolean;
  readAt: string | null;
  inFlight: number;
  belowFloor: boolean;
  stoppedAt: string | null;
  stalled: string | null;
}

interface HealthNetwork {
  chainId: number;
  network: string;
  ok: boolean;
  error: string | null;
  downSince: string | null;
  /** hash and timestamp: the block's, when read now; during an outage only the last number seen and when (seenAt). */
  head: { number: number; hash: string | null; timestamp: string | null; seenAt: string | null } | null;
  relayer: {
    senders: SenderRow[];
    queue: { queued: number; sent: number };
    inclusion: { mined: number; within: number; blocks: number; windowSec: number };
    unpaid: { shortfalls: number; costShortfalls?: { count: number; wei: string }; bars: RelayBar[] };
    prices?: { symbol: string; ok: boolean; nativePrice?: string; source?: string; reason?: string }[];
  } | null;
}

interface RelayBar {
  kind: 'wallet' | 'key' | 'ip';
  value: string;
  metaTxnId: string;
  feeToken: string | null;
  owed: string | null;
  received: string | null;
  createdAt: string;
}

/** Why a sender takes no new work, or that it runs. */
function senderState(s: SenderRow): string {
  if (s.stoppedAt) return `stopped since ${when(s.stoppedAt)}`;
  if (s.belowFloor) return 'below the balance floor';
  if (s.stalled) return `stalled: ${s.stalled}`;
  return 'running';
}

export function Health() {
  const d = useApi<{ networks: HealthNetwork[]; fleet?: { apiProcesses: number } }>('Health', {});
  const fleet = d.data?.fleet?.apiProcesses;
  const units = useUnits();
  const a = useAction();
  const toggle = async (chainId: number, index: number, stop: boolean) => {
    if ((await a.run(() => api(stop ? 'StopSender' : 'StartSender', { chainID: String(chainId), index }))) !== undefined) await d.reload();
  };
  const lift = async (b: RelayBar) => {
    if ((await a.run(() => api('LiftRelayBar', { kind: b.kind, value: b.value }))) !== undefined) await d.reload();
  };
  return (
    <section>
      <h2>Health</h2>
      <button onClick={d.reload}>Refresh</button>
      {fleet !== undefined && (
        <p data-testid="fleet">
          API processes on this database: <strong>{fleet}</strong>
          {fleet > 1 ? ` (each holds 1/${fleet} of every configured rate)` : ' (this one holds every configured rate)'}
        </p>
      )}
      {d.error && <p class="error">{d.error}</p>}
      {a.error && <p class="error">{a.error}</p>}
      {d.data?.networks.map((n) => (
        <div class="panel" data-testid={`health-${n.network}`}>
          <h3>
            {n.network} ({n.chainId}) <span class={n.ok ? 'ok' : 'error'}>{n.ok ? 'reachable' : 'down'}</span>
          </h3>
          {!n.ok && (
            <p class="error" data-testid="outage">
              Down{n.downSince ? ` since ${when(n.downSince)}` : ''}: {n.error}. Shown below: what was last known.
            </p>
          )}
          {n.head &&
            (n.head.hash && n.head.timestamp ? (
              <p>
                Head block <strong data-testid="head">{n.head.number}</strong> <code>{short(n.head.hash, 14)}</code> at {when(n.head.timestamp)}
              </p>
            ) : (
              <p>
                Last head seen <strong data-testid="head">{n.head.number}</strong>
                {n.head.seenAt && ` at ${when(n.head.seenAt)}`}
              </p>
            ))}
          {n.relayer && (
            <>
              <p>
                Queue: <strong>{n.relayer.queue.queued}</strong> queued, <strong>{n.relayer.queue.sent}</strong> sent and not yet mined
              </p>
              <p data-testid="inclusion">
                Included within {n.relayer.inclusion.blocks} blocks of the first broadcast (last {n.relayer.inclusion.windowSec / 60} min):{' '}
                <strong>{n.relayer.inclusion.mined ? `${Math.round((100 * n.relayer.inclusion.within) / n.relayer.inclusion.mined)}%` : 'n/a'}</strong> ({n.relayer.inclusion.within} of{' '}
                {n.relayer.inclusion.mined})
              </p>
              <table class="reflow" data-testid="senders">
                <thead>
                  <tr>
                    <th>Sender</th>
                    <th>Balance</th>
                    <th>Nonce (mined)</th>
                    <th>Nonce (pending)</th>
                    <th>In flight</th>
                    <th>State</th>
                    <th></th>
                  </tr>
                </thead>
                <tbody>
                  {n.relayer.senders.map((s) => (
                    <tr>
                      <td data-label="Sender">
                        <code title={s.address}>{short(s.address, 12)}</code>
                      </td>
                      <td data-label="Balance" data-testid={`sender-balance-${s.index}`}>
                        {s.balanceWei != null ? <Amount wei={s.balanceWei} unit={units.get(n.chainId) ?? NO_UNIT} testid={`sender-amount-${s.index}`} /> : 'unknown'}
                        {!s.live && s.readAt && <span class="hint"> (as of {when(s.readAt)})</span>}
                      </td>
                      <td data-label="Nonce (mined)">{s.nonce.chain ?? '?'}</td>
                      <td data-label="Nonce (pending)">{s.nonce.mempool ?? '?'}</td>
                      <td data-label="In flight">{s.inFlight}</td>
                      <td data-label="State" data-testid={`sender-state-${s.index}`}>
                        {senderState(s)}
                      </td>
                      <td>
                        <button data-testid={`sender-toggle-${s.index}`} disabled={a.busy} onClick={() => toggle(n.chainId, s.index, !s.stoppedAt)}>
                          {s.stoppedAt ? 'Start' : 'Stop'}
                        </button>
                      </td>
                    </tr>
                  ))}
                </tbody>
              </table>
              {n.relayer.prices && (
                <p data-testid="prices">
                  Fee-token prices (native per token):{' '}
                  {n.relayer.prices.map((p, i) => (
                    <span>
                      {i > 0 && ' · '}
                      {p.symbol}{' '}
                      {p.ok ? (
                        <>
                          {p.nativePrice} ({p.source})
                        </>
                      ) : (
                        <span class="error">withdrawn: {p.reason}</span>
                      )}
                    </span>
                  ))}
                </p>
              )}
              <p data-testid="unpaid">
                Mined without their fee: <strong>{n.relayer.unpaid.shortfalls}</strong> meta-transactions.
                {n.relayer.unpaid.costShortfalls && (
                  <>
                    {' '}
                    Cost more than their fee or hold covered: <strong>{n.relayer.unpaid.costShortfalls.count}</strong> (
                    <ReadableWei text={`${n.relayer.unpaid.costShortfalls.wei} wei`} unit={units.get(n.chainId) ?? NO_UNIT} />
                    ).
                  </>
                )}
                {n.relayer.unpaid.bars.length > 0 && ' Barred from fee-paid relaying:'}
              </p>
              {n.relayer.unpaid.bars.length > 0 && (
                <table class="reflow">
                  <thead>
                    <tr>
                      <th>Who</th>
                      <th>Meta-transaction</th>
                      <th>Owed</th>
                      <th>Received</th>
                      <th>Since</th>
                      <th></th>
                    </tr>
                  </thead>
                  <tbody>
                    {n.relayer.unpaid.bars.map((b) => (
                      <tr data-testid={`bar-${b.kind}`}>
                        <td data-label="Who">
                          {b.kind === 'key' ? `access key #${b.value}` : `${b.kind} `}
                          {b.kind !== 'key' && <code>{b.value}</code>}
                        </td>
                        <td data-label="Meta-transaction">
                          <code>{short(b.metaTxnId, 14)}</code>
                        </td>
                        <td data-label="Owed">
                          {b.feeToken === 'native' ? (
                            <Amount wei={b.owed} unit={units.get(n.chainId) ?? NO_UNIT} />
                          ) : (
                            <>
                              {b.owed} {b.feeToken ? <code>{short(b.feeToken, 10)}</code> : ''}
                            </>
                          )}
                        </td>
                        <td data-label="Received">{b.feeToken === 'native' ? <Amount wei={b.received} unit={units.get(n.chainId) ?? NO_UNIT} /> : b.received}</td>
                        <td data-label="Since">{when(b.createdAt)}</td>
                        <td>
                          <button disabled={a.busy} onClick={() => lift(b)}>
                            Lift
                          </button>
                        </td>
                      </tr>
                    ))}
                  </tbody>
                </table>
              )}
            </>
          )}
        </div>
      ))}
    </section>
  );
}
