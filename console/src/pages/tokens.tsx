import { useState } from 'preact/hooks';
import { api, short } from '../api.ts';
import { useAction } from '../hooks.ts';
import { FieldPicture, type PictureWire } from '../picture.tsx';

interface Attribute {
  trait_type?: string;
  value?: unknown;
  display_type?: string;
}

interface Token {
  tokenId?: string;
  name?: string;
  description?: string;
  image?: string;
  image_data?: string;
  animation_url?: string;
  external_url?: string;
  attributes?: Attribute[] | null;
}

interface Explanation {
  status: string;
  tokenUri: string | null;
  failureReason: string | null;
  trace: unknown;
  raw: unknown;
}

/** Where a source came from, in a line: a URL shortened, an inline document by its type and size (never its base64). */
function sourceLine(uri: string | null | undefined): string {
  if (!uri) return '—';
  const data = /^data:([^;,]+)?(;base64)?,/.exec(uri);
  if (data) {
    const bytes = data[2] ? Math.floor(((uri.length - data[0].length) * 3) / 4) : uri.length - data[0].length;
    return `on-chain ${data[1] ?? 'data'} (${bytes.toLocaleString('en-US')} bytes)`;
  }
  return uri.length > 80 ? `${uri.slice(0, 60)}…${uri.slice(-16)}` : uri;
}

const valueText = (v: unknown) => (typeof v === 'string' || typeof v === 'number' || typeof v === 'boolean' ? String(v) : JSON.stringify(v));

/** What was stored of each media field, with its renditions and original. */
function MediaFacts({ pictures }: { pictures: PictureWire[] }) {
  return (
    <dl class="facts" data-testid="lookup-media">
      {pictures.map((p) => [
        <dt>{p.field}</dt>,
        <dd>
          {p.ready ? (
            <>
              {p.mimeType}
              {p.width ? ` · ${p.width}×${p.height}` : ''}
              {p.large && (
                <>
                  {' · '}
                  <a href={p.large} target="_blank" rel="noopener">
                    1024 px
                  </a>
                </>
              )}
              {p.original && (
                <>
                  {' · '}
                  <a href={p.original} target="_blank" rel="noopener">
                    original
                  </a>
                </>
              )}
            </>
          ) : (
            <span class="error">
              {p.failureReason}
              {p.failureMessage ? `: ${p.failureMessage}` : ''}
            </span>
          )}
        </dd>,
      ])}
    </dl>
  );
}

/** A token as a token: picture, name, description, attributes; the trace and the raw document folded below. */
function TokenCard({ token, explanation, pictures, pending }: { token: Token; explanation: Explanation; pictures: PictureWire[] | null; pending: boolean }) {
  const attributes = Array.isArray(token.attributes) ? token.attributes : [];
  return (
    <div class="stack">
      <div class="token-card card" data-testid="token-card">
        <FieldPicture pictures={pictures} pending={pending} size={256} testid="media-image" />
        <div class="stack">
          <h3 data-testid="token-name">{token.name || <em>no name</em>}</h3>
          {token.description && <p data-testid="token-description">{token.description}</p>}
          {attributes.length > 0 && (
            <ul class="chips" data-testid="token-attributes">
              {attributes.map((x) => (
                <li class="chip">
                  <span class="trait">{x.trait_type ?? 'property'}</span> {valueText(x.value)}
                </li>
              ))}
            </ul>
          )}
          <dl class="facts">
            <dt>Status</dt>
            <dd>{explanation.status}</dd>
            <dt>Token URI</dt>
            <dd title={explanation.tokenUri?.startsWith('data:') ? undefined : (explanation.tokenUri ?? undefined)}>
              <code>{sourceLine(explanation.tokenUri)}</code>
            </dd>
            <dt>Image</dt>
            <dd>
              <code>{sourceLine(token.image ?? (token.image_data ? 'data:image/svg+xml,' + token.image_data : null))}</code>
            </dd>
            {token.external_url && (
              <>
                <dt>Link</dt>
                <dd>
                  <a href={token.external_url} target="_blank" rel="noopener noreferrer">
                    {short(token.external_url, 40)}
                  </a>
                </dd>
              </>
            )}
            {explanation.failureReason && (
              <>
                <dt>Failure</dt>
                <dd class="error">{explanation.failureReason}</dd>
              </>
            )}
          </dl>
        </div>
      </div>
      {pictures && pictures.length > 0 && (
        <details>
          <summary>Media</summary>
          <MediaFacts pictures={pictures} />
        </details>
      )}
      <details>
        <summary>Resolution trace</summary>
        <pre data-testid="lookup-trace">{JSON.stringify(explanation.trace, null, 2)}</pre>
      </details>
      <details>
        <summary>Raw JSON</summary>
        <pre data-testid="lookup-metadata">{JSON.stringify(token, null, 2)}</pre>
      </details>
    </div>
  );
}

/** A token's metadata, its picture and how it was found. */
export function TokenLookup() {
  const [f, setF] = useState({ chainID: '', contractAddress: '', tokenID: '' });
  const set = (k: keyof typeof f) => (e: Event) => setF({ ...f, [k]: (e.currentTarget as HTMLInputElement).value });
  const [out, setOut] = useState<{ token: Token; explanation: Explanation } | null>(null);
  const [pictures, setPictures] = useState<PictureWire[] | null>(null);
  const [pending, setPending] = useState(false);
  const [pictureError, setPictureError] = useState<string | null>(null);
  const a = useAction();
  const look = async (e: Event) => {
    e.preventDefault();
    const args = { chainID: f.chainID.trim(), contractAddress: f.contractAddress.trim(), tokenID: f.tokenID.trim() };
    setPictures(null);
    setPictureError(null);
    const found = await a.run(() => api<{ token: Token; explanation: Explanation }>('GetTokenTrace', args));
    setOut(found ?? null);
    if (!found) return;
    // The document shows at once; its picture follows when the media pipeline has it.
    setPending(true);
    try {
      setPictures((await api<{ pictures: PictureWire[] }>('TokenPictures', args)).pictures);
    } catch (err) {
      setPictureError((err as Error).message);
      setPictures([]);
    } finally {
      setPending(false);
    }
  };
  return (
    <section>
      <h2>Token lookup</h2>
      <form class="row" onSubmit={look}>
        <input data-testid="lookup-network" placeholder="Network (name or id)" value={f.chainID} onInput={set('chainID')} />
        <input data-testid="lookup-contract" class="addr" placeholder="Contract 0x…" value={f.contractAddress} onInput={set('contractAddress')} />
        <input data-testid="lookup-token" class="num" placeholder="Token id" value={f.tokenID} onInput={set('tokenID')} />
        <button data-testid="lookup" disabled={a.busy}>
          Look up
        </button>
      </form>
      {a.error && <p class="error">{a.error}</p>}
      {pictureError && <p class="error">{pictureError}</p>}
      {out && <TokenCard token={out.token} explanation={out.explanation} pictures={pictures} pending={pending} />}
    </section>
  );
}
