import { useEffect, useState } from 'preact/hooks';
import { api, short, when } from '../api.ts';
import { Pager, TableWrap, usePaged, type Paged } from '../list.tsx';
import { FieldPicture, Picture, Placeholder, type PictureWire } from '../picture.tsx';
import { CollectionSettings, NewCollection, NewToken, TokenEditor } from './collection-editor.tsx';

/*
 * The Collections tab: the token metadata and pictures a project hosts here (docs/collections.md).
 * A project edits its collections through Sequence's Collections API with its own key; the console
 * shows them as the operator sees them, including what is not published (and so not served).
 */

interface Contract {
  chainId: number;
  network: string;
  contractAddress: string;
}

interface Collection {
  id: number;
  name: string;
  description: string;
  published: boolean;
  tokenCount: number;
  tokenMetadataURI: string;
  contractMetadataURI: string;
  contracts: Contract[];
  /** On a collection's page: its own picture (the contractURI document's image). */
  picture?: PictureWire | null;
  updatedAt: string;
}

interface Token {
  tokenId: string;
  name: string;
  description: string;
  attributes: { trait_type?: string; value?: unknown }[];
  externalUrl: string | null;
  published: boolean;
  picture: PictureWire | null;
  imageSource: string | null;
  files: { field: string; mimeType: string; filename: string | null }[];
}

type Usage = { collections: number; tokens: number; assets: number; links: number; bytes: number };

interface CollectionPage extends Paged {
  collections: Collection[];
  /** What the project holds against its quotas (config collections.quotas). */
  usage: { used: Usage; quotas: Usage | null };
}

const USAGE_LABELS: Array<[keyof Usage, string]> = [
  ['collections', 'collections'],
  ['tokens', 'tokens'],
  ['assets', 'assets'],
  ['links', 'contract links'],
  ['bytes', 'MB stored'],
];

/** Each quota as "used of limit". */
function UsageLine({ usage }: { usage: CollectionPage['usage'] }) {
  const show = (k: keyof Usage, n: number) => (k === 'bytes' ? (n / 1_048_576).toFixed(1) : n.toLocaleString('en-US'));
  return (
    <p class="hint" data-testid="collections-usage">
      {USAGE_LABELS.map(([k, label], i) => (
        <span key={k}>
          {i ? ' · ' : ''}
          {show(k, usage.used[k])}
          {usage.quotas ? ` of ${show(k, usage.quotas[k])}` : ''} {label}
        </span>
      ))}
    </p>
  );
}

interface TokenPage extends Paged {
  collection: Collection;
  tokens: Token[];
}

/** Small enough for two tiles side by side on a 390 px phone. */
const TILE = 144;
const valueText = (v: unknown) => (typeof v === 'string' || typeof v === 'number' || typeof v === 'boolean' ? String(v) : v == null ? '' : JSON.stringify(v));

export function Collections({ projectId, collectionId }: { projectId: number; collectionId?: number }) {
  return collectionId ? <CollectionTokens projectId={projectId} collectionId={collectionId} /> : <CollectionList projectId={projectId} />;
}

const State = ({ published }: { published: boolean }) => (
  <span class={`badge ${published ? 'published' : ''}`} title={published ? 'served where tokenURI points' : 'not served: its URLs answer 404'}>
    {published ? 'published' : 'unpublished'}
  </span>
);

function Contracts({ list }: { list: Contract[] }) {
  if (!list.length) return <span class="hint">none linked</span>;
  return (
    <span class="stack-inline">
      {list.map((c) => (
        <span title={c.contractAddress}>
          {c.network} <code>{short(c.contractAddress)}</code>
        </span>
      ))}
    </span>
  );
}

function CollectionList({ projectId }: { projectId: number }) {
  const list = usePaged<CollectionPage>('ListProjectCollections', { projectId }, 25);
  const rows = list.data?.collections ?? [];
  return (
    <div>
      <p class="hint">
        Token metadata and pictures this project hosts here, made and edited here or with the project's secret key through <code>/rpc/Collections/</code>. A contract whose base URI is a collection's
        token URI serves its tokens from it; an unpublished collection is not served.
      </p>
      <NewCollection projectId={projectId} />
      {list.data?.usage && <UsageLine usage={list.data.usage} />}
      {list.error && <p class="error">{list.error}</p>}
      <div class="row">
        <Pager paged={list} shown={rows.length} testid="collections" noun="collections" />
      </div>
      <TableWrap>
        <table data-testid="collections" class="reflow">
          <thead>
            <tr>
              <th>Id</th>
              <th>Name</th>
              <th>State</th>
              <th>Tokens</th>
              <th>Contracts</th>
              <th>Updated</th>
            </tr>
          </thead>
          <tbody>
            {rows.map((c) => (
              <tr key={c.id} data-testid={`collection-${c.id}`}>
                <td data-label="Id">{c.id}</td>
                <td data-label="Name">
                  <a href={`#/projects/${projectId}/collections/${c.id}`}>{c.name || <em>no name</em>}</a>
                </td>
                <td data-label="State" data-testid="collection-state">
                  <State published={c.published} />
                </td>
                <td data-label="Tokens" data-testid="collection-token-count">
                  {c.tokenCount.toLocaleString('en-US')}
                </td>
                <td data-label="Contracts" data-testid="collection-contracts">
                  <Contracts list={c.contracts} />
                </td>
                <td data-label="Updated">{when(c.updatedAt)}</td>
              </tr>
            ))}
          </tbody>
        </table>
      </TableWrap>
    </div>
  );
}

function CollectionTokens({ projectId, collectionId }: { projectId: number; collectionId: number }) {
  const list = usePaged<TokenPage>('ListCollectionTokens', { projectId, collectionId }, 24);
  const c = list.data?.collection;
  const tokens = list.data?.tokens ?? [];
  // The token open in the editor: its row of the page on screen (read again after each change).
  const [open, setOpen] = useState<string | null>(null);
  const editing = tokens.find((t) => t.tokenId === open);
  return (
    <div class="stack">
      <p>
        <a href={`#/projects/${projectId}/collections`}>← Collections</a>
      </p>
      {list.error && <p class="error">{list.error}</p>}
      {c && (
        <div class="card stack">
          <h3 data-testid="collection-name">
            {c.name || <em>no name</em>} <State published={c.published} />
          </h3>
          {c.description && <p>{c.description}</p>}
          <dl class="facts">
            <dt>Token URI</dt>
            <dd>
              <code>{c.tokenMetadataURI}</code>
              <span class="hint">&lt;id&gt;</span>
            </dd>
            <dt>Contract URI</dt>
            <dd>
              <code>{c.contractMetadataURI}</code>
            </dd>
          </dl>
          {/* The linked contracts are listed (with Unlink) by the settings below. */}
          <CollectionSettings projectId={projectId} collection={c} onChange={list.reload} />
        </div>
      )}
      {c && (
        <NewToken
          projectId={projectId}
          collectionId={collectionId}
          onCreated={(id) => {
            setOpen(id);
            void list.reload();
          }}
        />
      )}
      {editing && <TokenEditor projectId={projectId} collectionId={collectionId} token={editing} onChange={list.reload} onClose={() => setOpen(null)} readAt={list.data} />}
      <div class="row">
        <Pager paged={list} shown={tokens.length} testid="collection-tokens" noun="tokens" labels={['‹ Previous', 'Next ›']} />
      </div>
      <ul class="token-grid" data-testid="collection-token-grid">
        {tokens.map((t) => (
          <li key={t.tokenId} class={`card token-tile ${open === t.tokenId ? 'selected' : ''}`} data-testid={`token-${t.tokenId}`}>
            <TilePicture token={t} contract={c?.contracts[0]} />
            <div>
              <strong data-testid="token-tile-name">{t.name || <em>no name</em>}</strong> <span class="hint">#{short(t.tokenId, 12)}</span>
              {!t.published && (
                <span class="badge" title="not served, even in a published collection">
                  hidden
                </span>
              )}
            </div>
            {t.attributes.length > 0 && (
              <ul class="chips">
                {t.attributes.slice(0, 3).map((x) => (
                  <li class="chip">
                    <span class="trait">{x.trait_type ?? 'property'}</span> {valueText(x.value)}
                  </li>
                ))}
              </ul>
            )}
            <button type="button" class="secondary" data-testid={`token-open-${t.tokenId}`} onClick={() => setOpen(t.tokenId)}>
              Edit
            </button>
          </li>
        ))}
      </ul>
    </div>
  );
}

/** The uploaded picture's rendition; a linked picture through the media pipeline now; or why there is none. */
function TilePicture({ token, contract }: { token: Token; contract?: Contract }) {
  const testid = `token-image-${token.tokenId}`;
  const p = token.picture;
  if (p?.thumbnail) return <Picture src={p.thumbnail} size={TILE} alt={token.name} testid={testid} href={p.large ?? p.original} />;
  if (token.imageSource && contract) return <LinkedPicture contract={contract} tokenId={token.tokenId} testid={testid} />;
  const text = token.files[0] ? `${token.files[0].mimeType}: no picture` : token.imageSource ? 'image linked, not uploaded: link a contract to see it' : 'no picture uploaded';
  return <Placeholder size={TILE} text={text} testid={`${testid}-none`} />;
}

/**
 * A picture the token's document links to rather than one uploaded here: the page cannot load it from
 * its source (its CSP allows this origin only), so the media pipeline fetches and checks it now by the
 * linked contract, as on the token page (TokenPictures).
 */
function LinkedPicture({ contract, tokenId, testid }: { contract: Contract; tokenId: string; testid: string }) {
  const [pictures, setPictures] = useState<PictureWire[] | null>(null);
  useEffect(() => {
    setPictures(null);
    api<{ pictures: PictureWire[] }>('TokenPictures', { chainID: String(contract.chainId), contractAddress: contract.contractAddress, tokenID: tokenId }).then(
      (r) => setPictures(r.pictures),
      (e) => setPictures([{ field: 'image', ready: false, failureReason: (e as Error).message, failureMessage: null, mimeType: null, width: null, height: null, thumbnail: null, original: null }]),
    );
  }, [contract.chainId, contract.contractAddress, tokenId]);
  return <FieldPicture pictures={pictures} pending={false} size={TILE} testid={testid} />;
}
