import { useState } from 'preact/hooks';
import { api, short, when } from '../api.ts';
import { useAction, useApi } from '../hooks.ts';
import { IndexerBalances } from './indexer-balances.tsx';

interface Backfill {
  id: number;
  chainId: number;
  scope: string;
  fromBlock: number;
  toBlock: number;
  status: string;
  /** Set for a contract's own history (added to a watchlist). */
  contracts: string[] | null;
  done: number;
  blocks: number;
  logs: number;
  malformed: number;
  ranges: { total: number; finished: number; leased: number };
}

interface IndexedChain {
  chainId: number;
  network: string;
  scope: string;
  cursor: number | null;
  head: number | null;
  malformed: number;
  watchlist: string[];
}

/** A block whose logs no read could get: passed over, retried at nextRetryAt (docs/indexer.md). */
interface UnreadBlock {
  chainId: number;
  reader: string;
  block: number;
  hash: string;
  error: string;
  retries: number;
  flaggedAt: string;
  nextRetryAt: string;
}

/** The indexed chains, an account's balances with pictures, and the backfill tasks (`metarelay indexer backfill` starts them). */
export function Indexer() {
  const st = useApi<{ chains: IndexedChain[]; backfills: Backfill[]; unreadBlocks: UnreadBlock[] }>('IndexerStatus', {});
  const [network, setNetwork] = useState('');
  const [contract, setContract] = useState('');
  const a = useAction();
  const watchlists = st.data?.chains.filter((c) => c.scope === 'watchlist') ?? [];
  const watch = async (e: Event) => {
    e.preventDefault();
    if (await a.run(() => api('IndexerWatch', { chainID: network || watchlists[0]?.network, contractAddress: contract }))) {
      setContract('');
      await st.reload();
    }
  };
  return (
    <section>
      <h2>Indexer</h2>
      <p class="row">
        <button onClick={st.reload}>Refresh</button>
      </p>
      {st.error && <p class="error">{st.error}</p>}
      <table data-testid="indexed-chains">
        <thead>
          <tr>
            <th>Network</th>
            <th>Scope</th>
            <th>Cursor</th>
            <th>Head</th>
            <th>Behind</th>
            <th>Malformed logs</th>
            <th>Watchlist</th>
          </tr>
        </thead>
        <tbody>
          {st.data?.chains.map((c) => (
            <tr key={c.chainId}>
              <td>{c.network}</td>
              <td>{c.scope}</td>
              <td>{c.cursor ?? '—'}</td>
              <td>{c.head ?? '—'}</td>
              <td>{c.cursor !== null && c.head !== null ? c.head - c.cursor : '—'}</td>
              <td>{c.malformed}</td>
              <td>
                {c.watchlist.map((a) => (
                  <code title={a}>{short(a)} </code>
                ))}
              </td>
            </tr>
          ))}
        </tbody>
      </table>
      {watchlists.length > 0 && (
        <form class="row" onSubmit={watch}>
          <select value={network} onChange={(e) => setNetwork(e.currentTarget.value)}>
            {watchlists.map((c) => (
              <option value={c.network}>{c.network}</option>
            ))}
          </select>
          <input data-testid="watch-contract" placeholder="0x… contract to watch" value={contract} onInput={(e) => setContract(e.currentTarget.value)} />
          <button type="submit" disabled={a.busy || !contract}>
            Watch
          </button>
          {a.error && <span class="error">{a.error}</span>}
        </form>
      )}
      <IndexerBalances networks={st.data?.chains ?? []} />
      <h3>Backfills</h3>
      <table data-testid="backfills">
        <thead>
          <tr>
            <th>Task</th>
            <th>Chain</th>
            <th>Blocks</th>
            <th>Status</th>
            <th>Progress</th>
            <th>Logs</th>
            <th>Malformed</th>
            <th>Ranges (leased)</th>
          </tr>
        </thead>
        <tbody>
          {st.data?.backfills.map((b) => (
            <tr key={b.id}>
              <td>{b.id}</td>
              <td>
                {b.chainId} ({b.scope})
                {b.contracts?.map((c) => (
                  <code title={c}> {short(c)}</code>
                ))}
              </td>
              <td>
                {b.fromBlock}…{b.toBlock}
              </td>
              <td>{b.status}</td>
              <td>
                <progress max={b.blocks || 1} value={b.done} /> {b.done}/{b.blocks}
              </td>
              <td>{b.logs}</td>
              <td>{b.malformed}</td>
              <td>
                {b.ranges.finished}/{b.ranges.total} ({b.ranges.leased})
              </td>
            </tr>
          ))}
        </tbody>
      </table>
      {(st.data?.unreadBlocks.length ?? 0) > 0 && (
        <>
          <h3>Unread blocks</h3>
          <p class="error">Their transfers (indexer) or refreshes (watcher) are missing until a retry reads them.</p>
          <table data-testid="unread-blocks">
            <thead>
              <tr>
                <th>Chain</th>
                <th>Reader</th>
                <th>Block</th>
                <th>Error</th>
                <th>Retries</th>
                <th>Flagged</th>
                <th>Next retry</th>
              </tr>
            </thead>
            <tbody>
              {st.data?.unreadBlocks.map((u) => (
                <tr key={`${u.chainId}:${u.reader}:${u.block}`}>
                  <td>{u.chainId}</td>
                  <td>{u.reader}</td>
                  <td title={u.hash}>{u.block}</td>
                  <td>{u.error}</td>
                  <td>{u.retries}</td>
                  <td>{when(u.flaggedAt)}</td>
                  <td>{when(u.nextRetryAt)}</td>
                </tr>
              ))}
            </tbody>
          </table>
        </>
      )}
      <p class="hint">
        Updated {when(new Date().toISOString())}. Start a backfill with <code>metarelay indexer backfill --chain NAME --from N</code>; a watched contract gets its own, worked in the background.
      </p>
    </section>
  );
}
