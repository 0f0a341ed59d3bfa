import { useState } from 'preact/hooks';
import { api } from '../api.ts';
import { useAction } from '../hooks.ts';

type Asset = { url: string; metadataField: string; mimeType: string; width?: number; height?: number; filesize?: number };

const WIDTHS = [64, 256, 512, 1024];

/** The cached media of a token (its `assets`): a thumbnail and every rendition, served by this origin. */
function TokenMedia({ token }: { token: unknown }) {
  const assets = ((token as { assets?: Asset[] })?.assets ?? []).filter((x) => typeof x?.url === 'string');
  if (!assets.length) return null;
  // Same-origin paths: the page's CSP allows images from 'self' only.
  const path = (url: string) => new URL(url, location.href).pathname;
  return (
    <div data-testid="lookup-media">
      <h3>Media</h3>
      {assets.map((x) => {
        const p = path(x.url);
        const image = x.mimeType.startsWith('image/');
        const base = p.replace(/\/[^/]+$/, '');
        return (
          <div class="row" key={x.metadataField}>
            {image && <img data-testid={`media-${x.metadataField}`} src={`${base}/256.webp`} alt={x.metadataField} width={128} />}
            <dl class="facts">
              <dt>Field</dt>
              <dd>{x.metadataField}</dd>
              <dt>Type</dt>
              <dd>
                {x.mimeType}
                {x.width ? ` · ${x.width}×${x.height}` : ''}
                {x.filesize ? ` · ${x.filesize} bytes` : ''}
              </dd>
              <dt>Renditions</dt>
              <dd>
                {image
                  ? WIDTHS.map((w) => (
                      <a key={w} href={`${base}/${w}.webp`} target="_blank" rel="noopener">
                        {w}{' '}
                      </a>
                    ))
                  : null}
                {x.mimeType !== 'image/webp' || !p.endsWith('.webp') ? (
                  <a href={p} target="_blank" rel="noopener">
                    original
                  </a>
                ) : null}
              </dd>
            </dl>
          </div>
        );
      })}
    </div>
  );
}

/** A token's metadata and the resolution trace: where the document came from and every URL tried. */
export function TokenLookup() {
  const [f, setF] = useState({ chainID: '', contractAddress: '', tokenID: '' });
  const set = (k: keyof typeof f) => (e: Event) => setF({ ...f, [k]: (e.currentTarget as HTMLInputElement).value });
  const [out, setOut] = useState<{ token: unknown; explanation: { status: string; tokenUri: string | null; failureReason: string | null; trace: unknown; raw: unknown } } | null>(null);
  const a = useAction();
  const look = async (e: Event) => {
    e.preventDefault();
    setOut((await a.run(() => api('GetTokenTrace', { chainID: f.chainID.trim(), contractAddress: f.contractAddress.trim(), tokenID: f.tokenID.trim() }))) ?? null);
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
      {out && (
        <div class="stack">
          <dl class="facts">
            <dt>Status</dt>
            <dd>{out.explanation.status}</dd>
            <dt>Token URI</dt>
            <dd>
              <code>{out.explanation.tokenUri ?? '—'}</code>
            </dd>
            <dt>Failure</dt>
            <dd>{out.explanation.failureReason ?? '—'}</dd>
          </dl>
          <TokenMedia token={out.token} />
          <h3>Metadata</h3>
          <pre data-testid="lookup-metadata">{JSON.stringify(out.token, null, 2)}</pre>
          <h3>Resolution trace</h3>
          <pre data-testid="lookup-trace">{JSON.stringify(out.explanation.trace, null, 2)}</pre>
        </div>
      )}
    </section>
  );
}
