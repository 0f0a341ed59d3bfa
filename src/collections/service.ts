// Collections: a project's token metadata and media kept here and served where a contract's
// tokenURI points. Who may touch a collection is decided here (its project, or the operator);
// the wire shapes are Sequence's (Collection, TokenMetadata, Asset, ContractCollection).

import type { BlobInfo, MediaUploads } from '../media/index.ts';
import { servedDocument, storedDocument } from './sanitize.ts';
import { linkRefusal, type LinkChain } from './link-proof.ts';
import type { FleetSize } from '../util/fleet-share.ts';
import { IpBuckets } from '../util/ip-buckets.ts';
import type { AssetRecord, CollectionRecord, CollectionStore, ContractLink, ProjectUsage, TokenRecord } from './store.ts';
import { DuplicateError } from './store.ts';

export type CollectionErrorKind = 'not_found' | 'denied' | 'conflict' | 'invalid' | 'media' | 'quota' | 'rate';

/** A refusal in the domain's words; the HTTP layer maps the kind to its error catalog. */
export class CollectionError extends Error {
  constructor(
    readonly kind: CollectionErrorKind,
    message: string,
    /** For `media`: the pipeline's reason (TOO_LARGE, UNSUPPORTED_TYPE, TOO_MANY_PIXELS, SVG_SCRIPT, …). */
    readonly reason?: string,
    /** For `rate`: when to try again. */
    readonly retryAfterSec?: number,
  ) {
    super(message);
  }
}

/** Who calls: a project (its access key) or the operator (admin token, any project). */
export type Actor = { projectId: number } | { admin: true };

/** The fields of a token document a collection keeps (Sequence's TokenMetadata, minus what the service fills in). */
export const DOCUMENT_FIELDS = ['name', 'description', 'image', 'video', 'audio', 'properties', 'attributes', 'image_data', 'external_url', 'background_color', 'animation_url', 'decimals'] as const;

export interface CollectionsDeps {
  store: CollectionStore;
  /** Uploaded bytes: the media pipeline's rules and blob store. */
  uploads: MediaUploads;
  /** The public URL of a stored blob (MediaService.blobUrl). */
  blobUrl: (blob: BlobInfo) => string;
  /** Where clients reach this service (media.publicUrl or the listening address). */
  publicUrl: () => string;
  /** The reads that prove a project controls a contract it links (link-proof.ts); undefined: a chain not configured. */
  linkChain?: (chainId: number) => LinkChain | undefined;
  /** What a project may hold (config collections.quotas); none: no limit. */
  quotas?: ProjectUsage;
  /** Uploads per project (config collections.uploads); none: no limit. */
  uploadRate?: { perMinute: number; burst: number };
  /** The API processes sharing the upload rate (util/fleet-share.ts); none: this process alone. */
  fleet?: FleetSize;
  /** After a change that changes what is served: linked contracts' cached metadata is refreshed. */
  onChanged?: (links: ContractLink[], projectId: number, tokenIds: string[] | null) => Promise<void> | void;
}

const PAGE_MAX = 100;

export class CollectionsService {
  /** Uploads per project, this process's share of them in its memory (keyed `p<project id>`). */
  private readonly uploadBuckets: IpBuckets | undefined;

  constructor(private readonly d: CollectionsDeps) {
    this.uploadBuckets = d.uploadRate && new IpBuckets(d.uploadRate.perMinute / 60, d.uploadRate.burst, d.fleet);
  }

  /** The project a call acts for: its own, or (operator) the one it names. */
  projectOf(actor: Actor, requested: number | undefined): number {
    if ('projectId' in actor) {
      if (requested !== undefined && requested !== actor.projectId) throw new CollectionError('denied', `this access key is for project ${actor.projectId}, not ${requested}`);
      return actor.projectId;
    }
    if (requested === undefined) throw new CollectionError('invalid', 'projectId: required with an admin token');
    return requested;
  }

  /** A collection the actor may see; another project's is reported as not found (its existence is not disclosed). */
  async collection(actor: Actor, id: number, requested?: number): Promise<CollectionRecord> {
    const c = await this.d.store.collection(id);
    const allowed = c && ('admin' in actor ? requested === undefined || requested === c.projectId : c.projectId === actor.projectId && (requested === undefined || requested === c.projectId));
    if (!c || !allowed) throw new CollectionError('not_found', `no collection ${id} in this project`);
    return c;
  }

  async create(actor: Actor, requested: number | undefined, metadata: Record<string, unknown>, priv: boolean | undefined): Promise<CollectionRecord> {
    const projectId = this.projectOf(actor, requested);
    const doc = stored(metadata);
    await this.withinQuota(projectId, 'collections');
    return this.d.store.createCollection(projectId, doc, priv ?? true);
  }

  /** What the project holds now, and its quotas (config collections.quotas). */
  async usage(projectId: number): Promise<{ used: ProjectUsage; quotas: ProjectUsage | null }> {
    return { used: await this.d.store.usage(projectId), quotas: this.d.quotas ?? null };
  }

  /**
   * Refuses a write that would take the project past a quota (QuotaExceeded). Checked before each write,
   * so two writes at once may pass the limit by one; an upload counts its file in full.
   */
  private async withinQuota(projectId: number, what: keyof ProjectUsage, adding = 1): Promise<void> {
    const max = this.d.quotas?.[what];
    if (max === undefined) return;
    const used = (await this.d.store.usage(projectId))[what];
    if (used + adding > max) {
      const unit = what === 'bytes' ? 'bytes of uploaded files' : what === 'links' ? 'contract links' : what;
      throw new CollectionError(
        'quota',
        `project ${projectId} holds ${used} ${unit} of its ${max} (collections.quotas.${what})${adding > 1 ? `, and this adds ${adding}` : ''}: delete some first, or ask the operator for more`,
      );
    }
  }

  async list(actor: Actor, requested: number | undefined, page: number, pageSize: number) {
    const projectId = 'admin' in actor ? (requested ?? null) : this.projectOf(actor, requested);
    const rows = await this.d.store.collections(projectId, page * pageSize, Math.min(pageSize, PAGE_MAX) + 1);
    return { items: rows.slice(0, pageSize), more: rows.length > pageSize };
  }

  async update(actor: Actor, requested: number | undefined, id: number, change: { metadata?: Record<string, unknown>; private?: boolean }): Promise<CollectionRecord> {
    const c = await this.collection(actor, id, requested);
    await this.d.store.updateCollection(c.id, change.metadata ? { ...change, metadata: stored(change.metadata) } : change);
    await this.changed(c, null);
    return (await this.d.store.collection(c.id))!;
  }

  async remove(actor: Actor, requested: number | undefined, id: number): Promise<void> {
    const c = await this.collection(actor, id, requested);
    const links = await this.d.store.links(null, c.id, 0, 10_000);
    await this.d.uploads.releaseAll(await this.d.store.deleteCollection(c.id));
    await this.d.onChanged?.(links, c.projectId, null);
  }

  async publish(actor: Actor, requested: number | undefined, id: number, published: boolean, recursive: boolean): Promise<CollectionRecord> {
    const c = await this.collection(actor, id, requested);
    await this.d.store.setPrivate(c.id, !published, recursive);
    await this.changed(c, null);
    return (await this.d.store.collection(c.id))!;
  }

  /** The collection's own assets (its image, banner, …). */
  collectionAssets(collectionId: number): Promise<AssetRecord[]> {
    return this.d.store.assetsOf(collectionId, ['']);
  }

  // Tokens

  async createToken(actor: Actor, requested: number | undefined, collectionId: number, tokenId: string, doc: Record<string, unknown>, priv: boolean | undefined) {
    const c = await this.collection(actor, collectionId, requested);
    const clean = stored(documentOf(doc));
    await this.withinQuota(c.projectId, 'tokens');
    const t = await this.conflicts(() => this.d.store.createToken(c.id, tokenId, clean, priv ?? false));
    await this.changed(c, [tokenId]);
    return t;
  }

  async token(actor: Actor, requested: number | undefined, collectionId: number, tokenId: string): Promise<{ collection: CollectionRecord; token: TokenRecord; assets: AssetRecord[] }> {
    const c = await this.collection(actor, collectionId, requested);
    const token = await this.d.store.token(c.id, tokenId);
    if (!token) throw new CollectionError('not_found', `no token ${tokenId} in collection ${c.id}`);
    return { collection: c, token, assets: await this.d.store.assetsOf(c.id, [tokenId]) };
  }

  async tokens(actor: Actor, requested: number | undefined, collectionId: number, page: number, pageSize: number) {
    const c = await this.collection(actor, collectionId, requested);
    const rows = await this.d.store.tokens(c.id, page * pageSize, Math.min(pageSize, PAGE_MAX) + 1);
    const items = rows.slice(0, pageSize);
    const assets = await this.d.store.assetsOf(
      c.id,
      items.map((t) => t.tokenId),
    );
    return { items, assets, more: rows.length > pageSize };
  }

  /**
   * Changes the fields `doc` names and keeps the rest: a field left out is not a field removed (Go
   * clients send null for "absent", so null cannot mean "remove"); a field sent as "" is removed.
   */
  async updateToken(actor: Actor, requested: number | undefined, collectionId: number, tokenId: string, doc: Record<string, unknown>, priv: boolean | undefined) {
    const c = await this.collection(actor, collectionId, requested);
    const unset = DOCUMENT_FIELDS.filter((k) => doc[k] === '');
    const set = documentOf(Object.fromEntries(Object.entries(doc).filter(([, v]) => v !== '')));
    const t = await this.d.store.updateToken(c.id, tokenId, stored(set), unset, priv);
    if (!t) throw new CollectionError('not_found', `no token ${tokenId} in collection ${c.id}`);
    await this.changed(c, [tokenId]);
    return { token: t, assets: await this.d.store.assetsOf(c.id, [tokenId]) };
  }

  async deleteToken(actor: Actor, requested: number | undefined, collectionId: number, tokenId: string): Promise<void> {
    const c = await this.collection(actor, collectionId, requested);
    const released = await this.d.store.deleteToken(c.id, tokenId);
    if (released === null) throw new CollectionError('not_found', `no token ${tokenId} in collection ${c.id}`);
    await this.d.uploads.releaseAll(released);
    await this.changed(c, [tokenId]);
  }

  // Assets

  async createAsset(actor: Actor, requested: number | undefined, a: { collectionId: number; tokenId: string; metadataField: string; filename: string | null }): Promise<AssetRecord> {
    const c = await this.collection(actor, a.collectionId, requested);
    if (a.tokenId && !(await this.d.store.token(c.id, a.tokenId))) throw new CollectionError('not_found', `no token ${a.tokenId} in collection ${c.id}: create the token first`);
    await this.withinQuota(c.projectId, 'assets');
    return this.conflicts(() => this.d.store.createAsset(c.id, a.tokenId, a.metadataField, a.filename));
  }

  async asset(actor: Actor, requested: number | undefined, id: number): Promise<{ collection: CollectionRecord; asset: AssetRecord }> {
    const asset = await this.d.store.asset(id);
    if (!asset) throw new CollectionError('not_found', `no asset ${id}`);
    const collection = await this.collection(actor, asset.collectionId, requested).catch(() => {
      throw new CollectionError('not_found', `no asset ${id}`);
    });
    return { collection, asset };
  }

  async updateAsset(actor: Actor, requested: number | undefined, id: number, change: { metadataField?: string; filename?: string | null; tokenId?: string }): Promise<AssetRecord> {
    const { collection, asset } = await this.asset(actor, requested, id);
    await this.conflicts(() => this.d.store.updateAsset(id, change));
    await this.changed(collection, [...new Set([asset.tokenId, change.tokenId ?? asset.tokenId])].filter(Boolean));
    return (await this.d.store.asset(id))!;
  }

  async deleteAsset(actor: Actor, requested: number | undefined, id: number): Promise<void> {
    const { collection, asset } = await this.asset(actor, requested, id);
    const released = await this.d.store.deleteAsset(id);
    await this.d.uploads.releaseAll([released ?? null]);
    await this.changed(collection, asset.tokenId ? [asset.tokenId] : null);
  }

  /** The bytes of an asset: checked by the media pipeline, stored by hash, the previous file released. */
  async upload(actor: Actor, requested: number | undefined, at: { collectionId: number; tokenId: string; assetId: number }, bytes: Buffer, filename: string | null): Promise<AssetRecord> {
    const { collection, asset } = await this.asset(actor, requested, at.assetId);
    if (asset.collectionId !== at.collectionId || asset.tokenId !== at.tokenId) {
      throw new CollectionError('not_found', `asset ${at.assetId} is not ${at.tokenId ? `token ${at.tokenId}'s` : 'the collection’s'} in collection ${at.collectionId}`);
    }
    const turn = this.uploadBuckets?.take(`p${collection.projectId}`);
    if (turn && !turn.ok) {
      throw new CollectionError(
        'rate',
        `project ${collection.projectId} is over its upload rate (collections.uploads: ${this.d.uploadRate!.perMinute}/min, burst ${this.d.uploadRate!.burst}); retry in ${turn.retryAfterSec} s`,
        undefined,
        turn.retryAfterSec,
      );
    }
    await this.withinQuota(collection.projectId, 'bytes', bytes.length);
    const stored = await this.d.uploads.store(bytes, (tx, blob) => this.d.store.pointAsset(tx, asset.id, blob.sha256, filename));
    if (!stored.ok) throw new CollectionError('media', `${stored.reason}: ${stored.message}`, stored.reason);
    await this.changed(collection, asset.tokenId ? [asset.tokenId] : null);
    return (await this.d.store.asset(asset.id))!;
  }

  // Contract links

  /**
   * Links a contract to a collection. A project (not an operator) proves it controls the contract
   * (link-proof.ts); a contract linked already is a conflict whatever the proof.
   */
  async link(actor: Actor, requested: number | undefined, l: { chainId: number; contractAddress: string; collectionId: number; ownerSignature?: string }): Promise<ContractLink> {
    const c = await this.collection(actor, l.collectionId, requested);
    if (await this.d.store.link(l.chainId, l.contractAddress)) throw new CollectionError('conflict', `contract ${l.contractAddress} on chain ${l.chainId} is already linked to a collection`);
    await this.withinQuota(c.projectId, 'links');
    if (!('admin' in actor)) {
      const tokenIds = (await this.d.store.tokens(c.id, 0, 3)).map((t) => t.tokenId);
      const refusal = await linkRefusal(this.d.linkChain?.(l.chainId), { ...l, projectId: c.projectId, collectionId: c.id, uris: this.baseURIs(c), tokenIds });
      if (refusal) throw new CollectionError('denied', refusal);
    }
    const link = await this.conflicts(() => this.d.store.createLink(c.projectId, l.chainId, l.contractAddress, c.id));
    await this.d.onChanged?.([link], c.projectId, null);
    return link;
  }

  async contractLink(actor: Actor, requested: number | undefined, chainId: number, contractAddress: string): Promise<ContractLink> {
    const link = await this.d.store.link(chainId, contractAddress);
    const mine = link && ('admin' in actor ? requested === undefined || requested === link.projectId : link.projectId === this.projectOf(actor, requested));
    if (!link || !mine) throw new CollectionError('not_found', `contract ${contractAddress} on chain ${chainId} is not linked to a collection of this project`);
    return link;
  }

  async contractLinks(actor: Actor, requested: number | undefined, collectionId: number | undefined, page: number, pageSize: number) {
    const projectId = 'admin' in actor ? (requested ?? null) : this.projectOf(actor, requested);
    if (collectionId !== undefined) await this.collection(actor, collectionId, requested);
    const rows = await this.d.store.links(projectId, collectionId ?? null, page * pageSize, Math.min(pageSize, PAGE_MAX) + 1);
    const items = rows.slice(0, pageSize);
    const collections = (await Promise.all([...new Set(items.map((l) => l.collectionId))].map((id) => this.d.store.collection(id)))).filter((c): c is CollectionRecord => !!c);
    return { items, collections, more: rows.length > pageSize };
  }

  async relink(actor: Actor, requested: number | undefined, l: { chainId: number; contractAddress: string; collectionId: number }): Promise<void> {
    const link = await this.contractLink(actor, requested, l.chainId, l.contractAddress);
    const c = await this.collection(actor, l.collectionId, requested);
    if (c.projectId !== link.projectId) throw new CollectionError('denied', `collection ${c.id} belongs to another project`);
    await this.d.store.relink(link.id, c.id);
    await this.d.onChanged?.([{ ...link, collectionId: c.id }], c.projectId, null);
  }

  async unlink(actor: Actor, requested: number | undefined, chainId: number, contractAddress: string): Promise<void> {
    const link = await this.contractLink(actor, requested, chainId, contractAddress);
    await this.d.store.unlink(link.id);
  }

  /** Forgets every contract link on a chain (what `metarelay dev` does for its previous anvil). */
  forgetChain(chainId: number): Promise<void> {
    return this.d.store.forgetChain(chainId);
  }

  // The console's pages (keyset cursors and counts, where Sequence's methods page by number)

  /** A project's collections newest first, before a collection id, with each one's contract links. */
  async collectionsPage(actor: Actor, requested: number, before: number | null, limit: number) {
    const projectId = this.projectOf(actor, requested);
    const { rows, total } = await this.d.store.collectionsBefore(projectId, before, Math.min(limit, PAGE_MAX + 1));
    return { items: rows, total, links: await this.d.store.linksOf(rows.map((c) => c.id)) };
  }

  /** A collection's tokens after a token id, with their assets and the collection's contract links. */
  async tokensPage(actor: Actor, requested: number, collectionId: number, after: string | null, limit: number) {
    const c = await this.collection(actor, collectionId, requested);
    const items = await this.d.store.tokensAfter(c.id, after, Math.min(limit, PAGE_MAX + 1));
    const [assets, links] = await Promise.all([
      this.d.store.assetsOf(
        c.id,
        items.map((t) => t.tokenId),
      ),
      this.d.store.linksOf([c.id]),
    ]);
    return { collection: c, items, assets, links };
  }

  // Serving (public: no actor, only what is published)

  /** A published token's ERC-721/1155 metadata JSON, or undefined (no such collection, token, or not published). */
  async publicToken(projectId: number, collectionId: number, tokenId: string): Promise<Record<string, unknown> | undefined> {
    const c = await this.d.store.collection(collectionId);
    if (!c || c.projectId !== projectId || c.private) return undefined;
    const t = await this.d.store.token(c.id, tokenId);
    if (!t || t.private) return undefined;
    return this.document(t.metadata, await this.d.store.assetsOf(c.id, [tokenId]));
  }

  /** A published collection's contract-level metadata (contractURI JSON). */
  async publicContract(projectId: number, collectionId: number): Promise<Record<string, unknown> | undefined> {
    const c = await this.d.store.collection(collectionId);
    if (!c || c.projectId !== projectId || c.private) return undefined;
    return this.document(c.metadata, await this.d.store.assetsOf(c.id, ['']));
  }

  /** A stored document with each uploaded asset's URL in its field. */
  document(metadata: Record<string, unknown>, assets: AssetRecord[]): Record<string, unknown> {
    // Sanitised as it is served too: rows stored before the rules (storedDocument) are served as safely.
    const out: Record<string, unknown> = servedDocument(metadata);
    for (const a of assets) if (a.blob) out[a.metadataField] = this.d.blobUrl(a.blob);
    return out;
  }

  assetUrl(a: AssetRecord): string | undefined {
    return a.blob ? this.d.blobUrl(a.blob) : undefined;
  }

  baseURIs(c: CollectionRecord) {
    const root = `${this.d.publicUrl()}/projects/${c.projectId}/collections/${c.id}`;
    return { contractMetadataURI: root, tokenMetadataURI: `${root}/tokens/` };
  }

  private async changed(c: CollectionRecord, tokenIds: string[] | null): Promise<void> {
    if (!this.d.onChanged) return;
    const links = await this.d.store.links(null, c.id, 0, 10_000);
    if (links.length) await this.d.onChanged(links, c.projectId, tokenIds);
  }

  private async conflicts<T>(fn: () => Promise<T>): Promise<T> {
    try {
      return await fn();
    } catch (err) {
      if (err instanceof DuplicateError) throw new CollectionError('conflict', err.message);
      throw err;
    }
  }
}

/** A document as it may be stored (collections/sanitize.ts), or the refusal saying why not. */
function stored(doc: Record<string, unknown>): Record<string, unknown> {
  const out = storedDocument(doc);
  if (typeof out === 'string') throw new CollectionError('invalid', out);
  return out;
}

/** The document fields a collection keeps of a TokenMetadata sent to it (the rest is the service's to fill). */
export function documentOf(doc: Record<string, unknown>): Record<string, unknown> {
  const out: Record<string, unknown> = {};
  for (const k of DOCUMENT_FIELDS) if (doc[k] !== undefined && doc[k] !== null) out[k] = doc[k];
  return out;
}
