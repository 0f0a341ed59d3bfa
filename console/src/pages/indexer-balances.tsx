import { useEffect, useState } from 'preact/hooks';
import { api, short } from '../api.ts';
import { useAction } from '../hooks.ts';
import { Logo, Picture, Placeholder, type PictureWire } from '../picture.tsx';
import { TableWrap } from '../list.tsx';

interface Balance {
  contractAddress: string;
  contractType: 'ERC20' | 'ERC721' | 'ERC1155';
  tokenID: string;
  balance: string;
  name: string;
  symbol: string;
  decimals: number | null;
  logoURI: string;
}

interface BalancePage {
  network: string;
  balances: Balance[];
  nextCursor: string | null;
}

const PAGE = 25;

/** An amount of a token with `decimals` (all of them kept, trailing zeros dropped). */
function units(raw: string, decimals: number | null): string {
  if (!decimals) return BigInt(raw).toLocaleString('en-US');
  const v = BigInt(raw);
  const base = 10n ** BigInt(decimals);
  const frac = (v % base).toString().padStart(decimals, '0').replace(/0+$/, '');
  return `${(v / base).toLocaleString('en-US')}${frac ? `.${frac}` : ''}`;
}

/** A collectible's picture: put through the media pipeline by TokenPictures, a placeholder meanwhile. */
function TokenThumb({ chainId, contract, tokenId }: { chainId: number; contract: string; tokenId: string }) {
  const [pic, setPic] = useState<PictureWire | null | undefined>(undefined);
  useEffect(() => {
    setPic(undefined);
    api<{ pictures: PictureWire[] }>('TokenPictures', { chainID: String(chainId), contractAddress: contract, tokenID: tokenId }).then(
      (r) => setPic(r.pictures.find((p) => p.ready && p.thumbnail) ?? null),
      () => setPic(null),
    );
  }, [chainId, contract, tokenId]);
  const testid = `balance-picture-${contract}-${tokenId}`;
  if (pic === undefined) return <Placeholder size={48} text="thumbnail being made…" testid={`${testid}-pending`} />;
  if (pic === null) return <Placeholder size={48} text="no picture" testid={`${testid}-none`} />;
  return <Picture src={pic.thumbnail?.replace(/\/256\.webp$/, '/64.webp')} size={48} alt="" testid={testid} href={pic.large ?? pic.original} />;
}

/** An account's balances as the index holds them, each with its token's picture or its contract's logo. */
export function IndexerBalances({ networks }: { networks: { chainId: number; network: string }[] }) {
  const [network, setNetwork] = useState('');
  const [account, setAccount] = useState('');
  const [cursors, setCursors] = useState<string[]>([]);
  const [page, setPage] = useState<(BalancePage & { chainId: number }) | null>(null);
  const a = useAction();
  const chain = networks.find((n) => n.network === network) ?? networks[0];
  const load = async (stack: string[]) => {
    if (!chain) return;
    const cursor = stack[stack.length - 1];
    const r = await a.run(() => api<BalancePage>('IndexerBalances', { chainID: String(chain.chainId), accountAddress: account.trim(), pageSize: PAGE, ...(cursor ? { cursor } : {}) }));
    if (r) {
      setCursors(stack);
      setPage({ ...r, chainId: chain.chainId });
    }
  };
  const look = (e: Event) => {
    e.preventDefault();
    void load([]);
  };
  if (!networks.length) return null;
  const first = cursors.length * PAGE;
  return (
    <div class="panel">
      <h3>Balances</h3>
      <form class="row" onSubmit={look}>
        <select value={chain?.network} onChange={(e) => setNetwork(e.currentTarget.value)} aria-label="Network">
          {networks.map((n) => (
            <option value={n.network}>{n.network}</option>
          ))}
        </select>
        <input data-testid="balances-account" class="addr" placeholder="Account 0x…" value={account} onInput={(e) => setAccount(e.currentTarget.value)} />
        <button data-testid="balances-lookup" disabled={a.busy || !account.trim()}>
          Look up
        </button>
      </form>
      {a.error && <p class="error">{a.error}</p>}
      {page && (
        <>
          <div class="pager">
            <span data-testid="balances-count">{page.balances.length ? `${first + 1}–${first + page.balances.length} on ${page.network}` : `No balances on ${page.network}`}</span>
            <button type="button" class="secondary" disabled={!cursors.length} onClick={() => load(cursors.slice(0, -1))}>
              ‹ Previous
            </button>
            <button type="button" class="secondary" disabled={!page.nextCursor} onClick={() => page.nextCursor && load([...cursors, page.nextCursor])}>
              Next ›
            </button>
          </div>
          <TableWrap>
            <table data-testid="balances">
              <thead>
                <tr>
                  <th />
                  <th>Token</th>
                  <th>Contract</th>
                  <th>Token id</th>
                  <th>Balance</th>
                </tr>
              </thead>
              <tbody>
                {page.balances.map((b) => (
                  <tr key={`${b.contractAddress}:${b.tokenID}`} data-testid={`balance-${b.contractAddress}-${b.tokenID}`}>
                    <td>
                      {b.contractType === 'ERC20' ? (
                        <Logo chainId={page.chainId} address={b.contractAddress} source={b.logoURI} size={48} />
                      ) : (
                        <TokenThumb chainId={page.chainId} contract={b.contractAddress} tokenId={b.tokenID} />
                      )}
                    </td>
                    <td>
                      {b.name || <em>unnamed</em>} {b.symbol && <span class="hint">{b.symbol}</span>} <span class="hint">{b.contractType}</span>
                    </td>
                    <td>
                      <code title={b.contractAddress}>{short(b.contractAddress)}</code>
                    </td>
                    <td>{b.contractType === 'ERC20' ? '' : b.tokenID}</td>
                    <td data-testid="balance-amount" title={`${b.balance} (raw)`}>
                      {units(b.balance, b.contractType === 'ERC20' ? b.decimals : 0)}
                    </td>
                  </tr>
                ))}
              </tbody>
            </table>
          </TableWrap>
        </>
      )}
    </div>
  );
}
