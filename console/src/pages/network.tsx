import { api, short } from '../api.ts';
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
            {n.isFeeRequired ? 'Fees required' : 'Gasless'} · paid to <code>{n.paymentAddress}</code> · markup ×{n.feeMarkup}
          </p>
          <table data-testid={`fees-${n.network}`}>
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
                  <td>{t.symbol}</td>
                  <td>{t.name}</td>
                  <td>{t.decimals}</td>
                  <td>
                    <code>{t.contractAddress ?? 'native'}</code>
                  </td>
                  <td>{t.nativePrice ?? <span class="error">withdrawn</span>}</td>
                  <td>{t.priceSource ?? t.priceError}</td>
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
  if (s.stoppedAt) return `stopped since ${new Date(s.stoppedAt).toLocaleString()}`;
  if (s.belowFloor) return 'below the balance floor';
  if (s.stalled) return `stalled: ${s.stalled}`;
  return 'running';
}

export function Health() {
  const d = useApi<{ networks: HealthNetwork[] }>('Health', {});
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
      {d.error && <p class="error">{d.error}</p>}
      {a.error && <p class="error">{a.error}</p>}
      {d.data?.networks.map((n) => (
        <div class="panel" data-testid={`health-${n.network}`}>
          <h3>
            {n.network} ({n.chainId}) <span class={n.ok ? 'ok' : 'error'}>{n.ok ? 'reachable' : 'down'}</span>
          </h3>
          {!n.ok && (
            <p class="error" data-testid="outage">
              Down{n.downSince ? ` since ${new Date(n.downSince).toLocaleString()}` : ''}: {n.error}. Shown below: what was last known.
            </p>
          )}
          {n.head &&
            (n.head.hash && n.head.timestamp ? (
              <p>
                Head block <strong data-testid="head">{n.head.number}</strong> <code>{short(n.head.hash, 14)}</code> at {new Date(n.head.timestamp).toLocaleTimeString()}
              </p>
            ) : (
              <p>
                Last head seen <strong data-testid="head">{n.head.number}</strong>
                {n.head.seenAt && ` at ${new Date(n.head.seenAt).toLocaleString()}`}
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
              <table>
                <thead>
                  <tr>
                    <th>Sender</th>
                    <th>Balance (ETH)</th>
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
                      <td>
                        <code>{s.address}</code>
                      </td>
                      <td data-testid={`sender-balance-${s.index}`}>
                        {s.etherBalance ?? 'unknown'}
                        {!s.live && s.readAt && <span class="hint"> (as of {new Date(s.readAt).toLocaleString()})</span>}
                      </td>
                      <td>{s.nonce.chain ?? '?'}</td>
                      <td>{s.nonce.mempool ?? '?'}</td>
                      <td>{s.inFlight}</td>
                      <td data-testid={`sender-state-${s.index}`}>{senderState(s)}</td>
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
                    Cost more than their fee or hold covered: <strong>{n.relayer.unpaid.costShortfalls.count}</strong> ({n.relayer.unpaid.costShortfalls.wei} wei).
                  </>
                )}
                {n.relayer.unpaid.bars.length > 0 && ' Barred from fee-paid relaying:'}
              </p>
              {n.relayer.unpaid.bars.length > 0 && (
                <table>
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
                        <td>
                          {b.kind === 'key' ? `access key #${b.value}` : `${b.kind} `}
                          {b.kind !== 'key' && <code>{b.value}</code>}
                        </td>
                        <td>
                          <code>{short(b.metaTxnId, 14)}</code>
                        </td>
                        <td>
                          {b.owed} {b.feeToken === 'native' ? 'wei' : b.feeToken ? <code>{short(b.feeToken, 10)}</code> : ''}
                        </td>
                        <td>{b.received}</td>
                        <td>{new Date(b.createdAt).toLocaleString()}</td>
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
