// Hosting a collection as a project does it: the official SequenceCollections client for the
// records, and the upload route (a multipart form, as Sequence's builder sends) for the bytes.
import { SequenceCollections } from '@0xsequence/metadata';

/** The refusal a call of an official client ended with (it throws WebrpcError subclasses). */
export async function errorOf(p: Promise<unknown>): Promise<{ code: number; error: string; status: number; cause?: string }> {
  try {
    await p;
  } catch (err) {
    return err as { code: number; error: string; status: number; cause?: string };
  }
  throw new Error('expected the call to be refused');
}

export type Uploaded = { status: number; body: Record<string, unknown> & { asset?: { url: string; id: number }; cause?: string; error?: string } };

/** PUTs a file to an asset's upload URL (`path` from the service root) with a project key or admin token. */
export async function uploadFile(base: string, path: string, bytes: Buffer, name: string, key: string): Promise<Uploaded> {
  const form = new FormData();
  form.append('file', new Blob([new Uint8Array(bytes)]), name);
  const res = await fetch(`${base}${path}`, { method: 'PUT', headers: { authorization: `Bearer ${key}` }, body: form });
  return { status: res.status, body: (await res.json()) as Uploaded['body'] };
}

export interface SampleToken {
  tokenId: string;
  name: string;
  /** Uploaded as the token's `image` asset. */
  picture?: { bytes: Buffer; filename: string };
  /** A document `image` URL instead of an upload. */
  image?: string;
}

/** A collection of the key's project with these tokens (and their pictures uploaded); published when asked. */
export async function hostCollection(base: string, key: string, projectId: number, name: string, tokens: SampleToken[], publish = true) {
  const client = new SequenceCollections(base, key);
  const { collection } = await client.createCollection({ collection: { metadata: { name, description: `${name}, hosted here` } } as never });
  for (const t of tokens) {
    await client.createToken({
      collectionId: collection.id,
      token: { tokenId: t.tokenId, name: t.name, ...(t.image ? { image: t.image } : {}), attributes: [{ trait_type: 'Kind', value: name }] } as never,
    });
    if (!t.picture) continue;
    const { asset } = await client.createAsset({ asset: { collectionId: collection.id, tokenId: t.tokenId, metadataField: 'image' } as never });
    const up = await uploadFile(base, `/projects/${projectId}/collections/${collection.id}/tokens/${t.tokenId}/upload/${asset.id}`, t.picture.bytes, t.picture.filename, key);
    if (up.status !== 200) throw new Error(`upload of token ${t.tokenId}'s picture: ${JSON.stringify(up.body)}`);
  }
  if (publish) await client.publishCollection({ collectionId: collection.id });
  return { client, collection };
}
