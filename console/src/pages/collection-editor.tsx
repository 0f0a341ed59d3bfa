import { useEffect, useRef, useState } from 'preact/hooks';
import { api } from '../api.ts';
import { ConfirmButton } from '../confirm.tsx';
import { useAction, useApi } from '../hooks.ts';
import { Picture, Placeholder, type PictureWire } from '../picture.tsx';
import '../editor.css';

/*
 * Collections as a product (docs/console.md, docs/collections.md): create a collection, add and edit
 * tokens and their attributes, drop pictures on them (the upload's progress shown), publish or
 * unpublish, link a contract, and see the JSON a contract's tokenURI will serve. Every button is one
 * console call, made as the operator through the same service as Sequence's Collections methods.
 */

export interface EditableContract {
  chainId: number;
  network: string;
  contractAddress: string;
}

export interface EditableCollection {
  id: number;
  name: string;
  description: string;
  published: boolean;
  tokenMetadataURI: string;
  contracts: EditableContract[];
  /** The collection's own picture (its contractURI document's image), uploaded here. */
  picture?: PictureWire | null;
}

export interface EditableToken {
  tokenId: string;
  name: string;
  description: string;
  attributes: { trait_type?: string; value?: unknown }[];
  externalUrl?: string | null;
  published: boolean;
  picture: PictureWire | null;
}

type Attr = { trait_type: string; value: string };

/** Numbers stay numbers (marketplaces rank numeric traits); anything else is text. */
const attrOut = (list: Attr[]) =>
  list.filter((a) => a.trait_type.trim() || a.value.trim()).map((a) => ({ trait_type: a.trait_type.trim(), value: /^-?\d+(\.\d+)?$/.test(a.value.trim()) ? Number(a.value) : a.value.trim() }));
const attrIn = (list: EditableToken['attributes']): Attr[] =>
  list.map((a) => ({ trait_type: a.trait_type ?? '', value: a.value == null ? '' : typeof a.value === 'object' ? JSON.stringify(a.value) : String(a.value) }));

/** A new collection: named, unpublished until Publish; opens once made. */
export function NewCollection({ projectId }: { projectId: number }) {
  const [name, setName] = useState('');
  const [description, setDescription] = useState('');
  const a = useAction();
  const create = async (e: Event) => {
    e.preventDefault();
    const r = await a.run(() => api<{ collection: { id: number } }>('CreateProjectCollection', { projectId, name, ...(description ? { description } : {}) }));
    if (r) location.hash = `#/projects/${projectId}/collections/${r.collection.id}`;
  };
  return (
    <form class="card editor-form" onSubmit={create} data-testid="new-collection">
      <strong>New collection</strong>
      <label>
        Name
        <input data-testid="new-collection-name" value={name} maxLength={200} onInput={(e) => setName(e.currentTarget.value)} />
      </label>
      <label>
        Description
        <input data-testid="new-collection-description" value={description} onInput={(e) => setDescription(e.currentTarget.value)} />
      </label>
      <button type="submit" data-testid="new-collection-create" disabled={a.busy || !name.trim()}>
        Create
      </button>
      {a.error && <p class="error">{a.error}</p>}
    </form>
  );
}

/** Publish or unpublish, rename, link and unlink contracts, delete. */
export function CollectionSettings({ projectId, collection, onChange }: { projectId: number; collection: EditableCollection; onChange: () => void }) {
  const a = useAction();
  const ids = { projectId, collectionId: collection.id };
  const act = async (method: string, args: Record<string, unknown>) => {
    if (await a.run(() => api(method, { ...ids, ...args }))) onChange();
  };
  return (
    <div class="stack">
      <div class="row">
        {collection.published ? (
          <ConfirmButton
            label="Unpublish"
            testid="collection-unpublish"
            question={`Unpublish "${collection.name}"? Its token and contract URLs answer 404 until it is published again.`}
            onConfirm={() => act('PublishProjectCollection', { published: false })}
          />
        ) : (
          <button type="button" data-testid="collection-publish" disabled={a.busy} onClick={() => act('PublishProjectCollection', { published: true })}>
            Publish
          </button>
        )}
        <ConfirmButton
          label="Delete collection"
          testid="collection-delete"
          question={`Delete "${collection.name}" with its tokens, pictures and contract links? This cannot be undone.`}
          onConfirm={async () => {
            if (await a.run(() => api('DeleteProjectCollection', ids))) location.hash = `#/projects/${projectId}/collections`;
          }}
        />
      </div>
      {a.error && (
        <p class="error" data-testid="collection-error">
          {a.error}
        </p>
      )}
      <details>
        <summary data-testid="collection-picture-open">Collection picture</summary>
        <p class="hint">The image of the collection's contractURI document (marketplaces show it as the collection's logo).</p>
        <DropZone
          url={`/console/upload/projects/${projectId}/collections/${collection.id}/image`}
          picture={collection.picture ?? null}
          alt={collection.name}
          testid="collection-drop"
          onUploaded={onChange}
        />
      </details>
      <details>
        <summary>Name and description</summary>
        <RenameCollection projectId={projectId} collection={collection} onChange={onChange} />
      </details>
      <LinkContract projectId={projectId} collection={collection} onChange={onChange} />
    </div>
  );
}

function RenameCollection({ projectId, collection, onChange }: { projectId: number; collection: EditableCollection; onChange: () => void }) {
  const [name, setName] = useState(collection.name);
  const [description, setDescription] = useState(collection.description);
  const a = useAction();
  const save = async (e: Event) => {
    e.preventDefault();
    if (await a.run(() => api('UpdateProjectCollection', { projectId, collectionId: collection.id, name, description }))) onChange();
  };
  return (
    <form class="editor-form" onSubmit={save}>
      <label>
        Name
        <input value={name} maxLength={200} onInput={(e) => setName(e.currentTarget.value)} />
      </label>
      <label>
        Description
        <input value={description} onInput={(e) => setDescription(e.currentTarget.value)} />
      </label>
      <button type="submit" disabled={a.busy || !name.trim()}>
        Save
      </button>
      {a.error && <p class="error">{a.error}</p>}
    </form>
  );
}

/**
 * Links a contract as the project would, with proof that the project controls it (its contractURI or
 * tokenURI already points here, or its owner's signature); refused, the page says why and offers to
 * link it on the operator's word, behind a confirmation.
 */
function LinkContract({ projectId, collection, onChange }: { projectId: number; collection: EditableCollection; onChange: () => void }) {
  const networks = useApi<{ networks: { chainId: number; name: string }[] }>('ListNetworks', {});
  const [chainID, setChainID] = useState('');
  const [address, setAddress] = useState('');
  const [signature, setSignature] = useState('');
  const [refused, setRefused] = useState<string | null>(null);
  const a = useAction();
  const chain = chainID || String(networks.data?.networks[0]?.chainId ?? '');
  const link = async (withoutProof: boolean) => {
    setRefused(null);
    const args = { projectId, collectionId: collection.id, chainID: chain, contractAddress: address.trim(), ...(signature.trim() ? { ownerSignature: signature.trim() } : {}), withoutProof };
    try {
      await api('LinkCollectionContract', args);
      setAddress('');
      setSignature('');
      onChange();
    } catch (err) {
      const e = err as { error?: string; cause?: string; message: string };
      if (e.error === 'PermissionDenied') setRefused(e.cause ?? e.message);
      else await a.run(() => Promise.reject(err));
    }
  };
  return (
    <div class="stack" data-testid="collection-link">
      <strong>Contracts</strong>
      {collection.contracts.length === 0 && <p class="hint">No contract is linked. Deploy with the token URI above as the base URI, then link the contract here.</p>}
      <ul class="plain">
        {collection.contracts.map((c) => (
          <li key={`${c.chainId}-${c.contractAddress}`} class="row" data-testid={`linked-${c.contractAddress}`}>
            <span>
              {c.network} <code class="wrap">{c.contractAddress}</code>
            </span>
            <ConfirmButton
              label="Unlink"
              testid={`unlink-${c.contractAddress}`}
              question={`Unlink ${c.contractAddress}? Its tokens' metadata is no longer read from this collection here.`}
              onConfirm={async () => {
                if (await a.run(() => api('UnlinkCollectionContract', { projectId, chainID: String(c.chainId), contractAddress: c.contractAddress }))) onChange();
              }}
            />
          </li>
        ))}
      </ul>
      <details data-testid="link-form">
        <summary data-testid="link-open">Link a contract</summary>
        <form
          class="editor-form"
          onSubmit={(e) => {
            e.preventDefault();
            void link(false);
          }}
        >
          <label>
            Network
            <select data-testid="link-network" value={chain} onChange={(e) => setChainID(e.currentTarget.value)}>
              {networks.data?.networks.map((n) => (
                <option value={String(n.chainId)}>{n.name}</option>
              ))}
            </select>
          </label>
          <label>
            Contract address
            <input data-testid="link-address" class="addr" value={address} placeholder="0x…" onInput={(e) => setAddress(e.currentTarget.value)} />
          </label>
          <label>
            Owner's signature <span class="hint">(optional, if the contract does not point here yet)</span>
            <input value={signature} placeholder="0x…" onInput={(e) => setSignature(e.currentTarget.value)} />
          </label>
          <button type="submit" data-testid="link-contract" disabled={!address.trim() || !chain}>
            Link contract
          </button>
        </form>
      </details>
      {refused && (
        <div class="confirm-block" data-testid="link-refused">
          <p class="error">{refused}</p>
          <ConfirmButton
            label="Link without proof"
            testid="link-without-proof"
            question="Link it on the operator's word? The project has not shown that it controls this contract."
            onConfirm={() => link(true)}
          />
        </div>
      )}
      {a.error && <p class="error">{a.error}</p>}
    </div>
  );
}

/** Rows of trait and value, with a row added or removed at will. */
function AttributesEditor({ value, onChange, testid }: { value: Attr[]; onChange: (v: Attr[]) => void; testid: string }) {
  const set = (i: number, k: keyof Attr, v: string) => onChange(value.map((a, j) => (j === i ? { ...a, [k]: v } : a)));
  return (
    <fieldset class="attributes" data-testid={testid}>
      <legend>Attributes</legend>
      {value.map((a, i) => (
        <div class="attr-row" key={i}>
          <input aria-label="trait" placeholder="trait (e.g. Color)" value={a.trait_type} data-testid={`${testid}-trait-${i}`} onInput={(e) => set(i, 'trait_type', e.currentTarget.value)} />
          <input aria-label="value" placeholder="value" value={a.value} data-testid={`${testid}-value-${i}`} onInput={(e) => set(i, 'value', e.currentTarget.value)} />
          <button type="button" class="secondary" aria-label="remove attribute" onClick={() => onChange(value.filter((_, j) => j !== i))}>
            ×
          </button>
        </div>
      ))}
      <button type="button" class="secondary" data-testid={`${testid}-add`} onClick={() => onChange([...value, { trait_type: '', value: '' }])}>
        + Attribute
      </button>
    </fieldset>
  );
}

/** A new token: its id, name, description and attributes (a picture is dropped on it once made). */
export function NewToken({ projectId, collectionId, onCreated }: { projectId: number; collectionId: number; onCreated: (tokenId: string) => void }) {
  const empty = { tokenId: '', name: '', description: '' };
  const [form, setForm] = useState(empty);
  const [attrs, setAttrs] = useState<Attr[]>([{ trait_type: '', value: '' }]);
  const box = useRef<HTMLDetailsElement>(null);
  const a = useAction();
  const create = async (e: Event) => {
    e.preventDefault();
    const r = await a.run(() =>
      api<{ tokenId: string }>('CreateCollectionToken', {
        projectId,
        collectionId,
        tokenId: form.tokenId.trim(),
        name: form.name,
        ...(form.description ? { description: form.description } : {}),
        attributes: attrOut(attrs),
      }),
    );
    if (!r) return;
    setForm(empty);
    setAttrs([{ trait_type: '', value: '' }]);
    // Made: the form folds away and the token opens in its editor.
    if (box.current) box.current.open = false;
    onCreated(r.tokenId);
  };
  return (
    <details class="card" data-testid="new-token" ref={box}>
      <summary data-testid="new-token-open">+ New token</summary>
      <form class="editor-form" onSubmit={create}>
        <label>
          Token id
          <input data-testid="new-token-id" class="num" inputMode="numeric" placeholder="e.g. 1" value={form.tokenId} onInput={(e) => setForm({ ...form, tokenId: e.currentTarget.value })} />
        </label>
        <label>
          Name
          <input data-testid="new-token-name" value={form.name} onInput={(e) => setForm({ ...form, name: e.currentTarget.value })} />
        </label>
        <label>
          Description
          <textarea rows={2} value={form.description} onInput={(e) => setForm({ ...form, description: e.currentTarget.value })} />
        </label>
        <AttributesEditor value={attrs} onChange={setAttrs} testid="new-token-attr" />
        <button type="submit" data-testid="new-token-create" disabled={a.busy || !form.tokenId.trim()}>
          Create token
        </button>
        {a.error && (
          <p class="error" data-testid="new-token-error">
            {a.error}
          </p>
        )}
      </form>
    </details>
  );
}

/** A token opened for editing: its fields and attributes, its picture (dropped or chosen), hidden or shown, its tokenURI preview. */
export function TokenEditor({
  projectId,
  collectionId,
  token,
  onChange,
  onClose,
  readAt,
}: {
  projectId: number;
  collectionId: number;
  token: EditableToken;
  onChange: () => void;
  onClose: () => void;
  /** The collection's page as last read: a new read (published, a contract linked) reads the preview again. */
  readAt: unknown;
}) {
  const [form, setForm] = useState({ name: token.name, description: token.description, externalUrl: token.externalUrl ?? '' });
  const [attrs, setAttrs] = useState<Attr[]>(attrIn(token.attributes));
  const [version, setVersion] = useState(0);
  const [saved, setSaved] = useState(false);
  const a = useAction();
  // Another token opened in the same panel starts from its own fields.
  useEffect(() => {
    setForm({ name: token.name, description: token.description, externalUrl: token.externalUrl ?? '' });
    setAttrs(attrIn(token.attributes));
    setSaved(false);
  }, [token.tokenId]);
  const ids = { projectId, collectionId, tokenId: token.tokenId };
  const changed = () => {
    setVersion((v) => v + 1);
    onChange();
  };
  const save = async (e: Event) => {
    e.preventDefault();
    setSaved(false);
    const ok = await a.run(() => api('UpdateCollectionToken', { ...ids, name: form.name, description: form.description, external_url: form.externalUrl.trim(), attributes: attrOut(attrs) }));
    if (ok) {
      setSaved(true);
      changed();
    }
  };
  const setShown = async (published: boolean) => {
    if (await a.run(() => api('UpdateCollectionToken', { ...ids, published }))) changed();
  };
  return (
    <section class="card token-editor" data-testid="token-editor">
      <div class="row">
        <h3>Token #{token.tokenId}</h3>
        <button type="button" class="secondary" data-testid="token-editor-close" onClick={onClose}>
          Close
        </button>
      </div>
      <div class="editor-columns">
        <DropZone
          url={`/console/upload/projects/${projectId}/collections/${collectionId}/tokens/${encodeURIComponent(token.tokenId)}/image`}
          picture={token.picture}
          alt={token.name}
          testid="token-drop"
          onUploaded={changed}
        />
        <form class="editor-form" onSubmit={save}>
          <label>
            Name
            <input data-testid="token-name" value={form.name} onInput={(e) => setForm({ ...form, name: e.currentTarget.value })} />
          </label>
          <label>
            Description
            <textarea rows={3} data-testid="token-description" value={form.description} onInput={(e) => setForm({ ...form, description: e.currentTarget.value })} />
          </label>
          <label>
            External link
            <input placeholder="https://…" value={form.externalUrl} onInput={(e) => setForm({ ...form, externalUrl: e.currentTarget.value })} />
          </label>
          <AttributesEditor value={attrs} onChange={setAttrs} testid="token-attr" />
          <div class="row">
            <button type="submit" data-testid="token-save" disabled={a.busy}>
              Save
            </button>
            {saved && (
              <span class="ok" data-testid="token-saved">
                Saved
              </span>
            )}
            {token.published ? (
              <button type="button" class="secondary" data-testid="token-hide" title="Not served, even in a published collection" onClick={() => setShown(false)}>
                Hide
              </button>
            ) : (
              <button type="button" class="secondary" data-testid="token-show" onClick={() => setShown(true)}>
                Show
              </button>
            )}
            <ConfirmButton
              label="Delete token"
              testid="token-delete"
              question={`Delete token #${token.tokenId} and its pictures? Its tokenURI answers 404 from then on.`}
              onConfirm={async () => {
                if (await a.run(() => api('DeleteCollectionToken', ids))) {
                  onClose();
                  onChange();
                }
              }}
            />
          </div>
          {a.error && (
            <p class="error" data-testid="token-error">
              {a.error}
            </p>
          )}
        </form>
      </div>
      <TokenPreview projectId={projectId} collectionId={collectionId} tokenId={token.tokenId} version={version} readAt={readAt} />
    </section>
  );
}

type Upload = { state: 'idle' } | { state: 'sending'; loaded: number; total: number; name: string } | { state: 'failed'; message: string };

/**
 * The token's picture, and a drop target for a new one: a file dropped (or chosen) goes up as the raw
 * request body of one PUT, the bar following its bytes; the media pipeline then checks it (a file that
 * is not a picture is refused, saying why) and the tile shows its thumbnail.
 */
function DropZone({ url, picture, alt, testid, onUploaded }: { url: string; picture: PictureWire | null; alt: string; testid: string; onUploaded: () => void }) {
  const [up, setUp] = useState<Upload>({ state: 'idle' });
  const [over, setOver] = useState(false);
  const input = useRef<HTMLInputElement>(null);
  const send = (file: File) => {
    const xhr = new XMLHttpRequest();
    xhr.open('PUT', `${url}?filename=${encodeURIComponent(file.name)}`);
    xhr.setRequestHeader('Content-Type', file.type || 'application/octet-stream');
    setUp({ state: 'sending', loaded: 0, total: file.size, name: file.name });
    xhr.upload.onprogress = (e) => setUp({ state: 'sending', loaded: e.loaded, total: e.lengthComputable ? e.total : file.size, name: file.name });
    xhr.onload = () => {
      if (xhr.status === 200) {
        setUp({ state: 'idle' });
        onUploaded();
        return;
      }
      let message = `${xhr.status} ${xhr.statusText}`;
      try {
        const body = JSON.parse(xhr.responseText) as { error?: string; cause?: string };
        message = `${body.error ?? 'Error'}: ${body.cause ?? message}`;
      } catch {}
      setUp({ state: 'failed', message });
    };
    xhr.onerror = () => setUp({ state: 'failed', message: 'the upload did not reach the server' });
    xhr.send(file);
  };
  const p = picture;
  return (
    <section
      class={`drop-zone ${over ? 'over' : ''}`}
      aria-label="the token's picture: drop a file here"
      data-testid={testid}
      onDragOver={(e) => {
        e.preventDefault();
        setOver(true);
      }}
      onDragLeave={() => setOver(false)}
      onDrop={(e) => {
        e.preventDefault();
        setOver(false);
        const file = e.dataTransfer?.files[0];
        if (file) send(file);
      }}
    >
      {p?.thumbnail ? (
        <Picture src={p.thumbnail} size={192} alt={alt} testid={`${testid}-image`} href={p.large ?? p.original} />
      ) : (
        <Placeholder size={192} text="no picture yet" testid={`${testid}-image-none`} />
      )}
      <p class="hint">Drop a picture here (PNG, JPEG, GIF, WebP, SVG) or</p>
      <button type="button" class="secondary" onClick={() => input.current?.click()}>
        Choose a file…
      </button>
      <input
        ref={input}
        type="file"
        accept="image/*"
        hidden
        data-testid={`${testid}-input`}
        onChange={(e) => {
          const file = e.currentTarget.files?.[0];
          if (file) send(file);
          e.currentTarget.value = '';
        }}
      />
      {up.state === 'sending' && (
        <div class="upload" data-testid={`${testid}-progress`}>
          <progress max={up.total || 1} value={up.loaded} />
          <span>
            {up.name}: {up.total ? Math.round((up.loaded / up.total) * 100) : 0}%
          </span>
        </div>
      )}
      {up.state === 'failed' && (
        <p class="error" data-testid={`${testid}-error`}>
          {up.message}
        </p>
      )}
    </section>
  );
}

interface Preview {
  url: string;
  served: Record<string, unknown> | null;
  notServedBecause: string | null;
  document: Record<string, unknown>;
  contracts: { network: string; contractAddress: string; tokenURI: string | null; pointsHere: boolean; error: string | null }[];
}

/** What the token's metadata URL serves (or will, once published), and what each linked contract's tokenURI answers. */
function TokenPreview({ projectId, collectionId, tokenId, version, readAt }: { projectId: number; collectionId: number; tokenId: string; version: number; readAt: unknown }) {
  const p = useApi<Preview>('CollectionTokenPreview', { projectId, collectionId, tokenId }, [version, readAt]);
  if (p.error) return <p class="error">{p.error}</p>;
  if (!p.data) return null;
  const d = p.data;
  return (
    <details class="preview" data-testid="token-preview" open>
      <summary>What tokenURI serves</summary>
      <p>
        <code class="wrap" data-testid="token-preview-url">
          {d.url}
        </code>{' '}
        {d.served ? (
          <span class="badge published" data-testid="token-preview-state">
            served now
          </span>
        ) : (
          <span class="badge" data-testid="token-preview-state">
            404 now: {d.notServedBecause}
          </span>
        )}
      </p>
      {d.contracts.map((c) => (
        <p class="hint" key={c.contractAddress}>
          {c.network} <code class="wrap">{c.contractAddress}</code> tokenURI({tokenId}): {c.tokenURI ? <code class="wrap">{c.tokenURI}</code> : c.error}{' '}
          {c.tokenURI && (c.pointsHere ? <span class="ok">points here</span> : <span class="note">points elsewhere</span>)}
        </p>
      ))}
      <pre data-testid="token-preview-json">{JSON.stringify(d.served ?? d.document, null, 2)}</pre>
    </details>
  );
}
