// Blob store in S3-compatible storage, for several hosts sharing one media cache. Credentials come
// from the AWS SDK's default provider chain (AWS_ACCESS_KEY_ID / AWS_SECRET_ACCESS_KEY, profiles,
// instance roles), never from the config file.

import type { S3Client } from '@aws-sdk/client-s3';
import type { Readable } from 'node:stream';
import type { BlobStore } from './blob-store.ts';

export type S3StoreOptions = {
  bucket: string;
  region: string;
  endpoint?: string;
  forcePathStyle?: boolean;
  prefix?: string;
  /** Tests pass the local server's; deployments leave it to the SDK's provider chain. */
  credentials?: { accessKeyId: string; secretAccessKey: string };
};

function isMissing(err: unknown): boolean {
  const e = err as { name?: string; $metadata?: { httpStatusCode?: number } };
  return e?.name === 'NoSuchKey' || e?.name === 'NotFound' || e?.$metadata?.httpStatusCode === 404;
}

type Sdk = typeof import('@aws-sdk/client-s3');

export function s3BlobStore(o: S3StoreOptions): BlobStore {
  // The SDK is loaded at the first call, not with this module: loading it is ~150 ms of CPU, which
  // every process start (serve, worker, relayer, dev, each CLI command loading the wiring) paid
  // whatever store the config names.
  let loaded: Promise<{ sdk: Sdk; client: S3Client }> | undefined;
  let opened: S3Client | undefined;
  let closed = false;
  const s3 = () =>
    (loaded ??= import('@aws-sdk/client-s3').then((sdk) => {
      opened = new sdk.S3Client({
        region: o.region,
        ...(o.endpoint ? { endpoint: o.endpoint } : {}),
        forcePathStyle: o.forcePathStyle ?? false,
        ...(o.credentials ? { credentials: o.credentials } : {}),
      });
      // Closed while loading: closed at once, as close() closed the client before.
      if (closed) opened.destroy();
      return { sdk, client: opened };
    }));
  const prefix = o.prefix ?? '';
  const Bucket = o.bucket;

  async function read(key: string, range?: string): Promise<Buffer | undefined> {
    const { sdk, client } = await s3();
    try {
      const res = await client.send(new sdk.GetObjectCommand({ Bucket, Key: prefix + key, ...(range ? { Range: range } : {}) }));
      return Buffer.from(await res.Body!.transformToByteArray());
    } catch (err) {
      if (isMissing(err)) return undefined;
      throw err;
    }
  }

  async function entries(p: string): Promise<Array<{ key: string; modifiedAt: Date }>> {
    const found: Array<{ key: string; modifiedAt: Date }> = [];
    const { sdk, client } = await s3();
    let token: string | undefined;
    do {
      const res = await client.send(new sdk.ListObjectsV2Command({ Bucket, Prefix: prefix + p, ContinuationToken: token }));
      for (const c of res.Contents ?? []) if (c.Key) found.push({ key: c.Key.slice(prefix.length), modifiedAt: c.LastModified ?? new Date(0) });
      token = res.IsTruncated ? res.NextContinuationToken : undefined;
    } while (token);
    return found.sort((a, b) => (a.key < b.key ? -1 : a.key > b.key ? 1 : 0));
  }
  const list = async (p: string) => (await entries(p)).map((e) => e.key);

  return {
    kind: 's3',
    async put(key, bytes, contentType) {
      // One PUT is atomic in S3: the object appears whole or not at all.
      const { sdk, client } = await s3();
      await client.send(new sdk.PutObjectCommand({ Bucket, Key: prefix + key, Body: bytes, ContentType: contentType }));
    },
    get: (key) => read(key),
    getRange: (key, start, end) => read(key, `bytes=${start}-${end}`),
    async stream(key, range) {
      const { sdk, client } = await s3();
      try {
        const res = await client.send(new sdk.GetObjectCommand({ Bucket, Key: prefix + key, ...(range ? { Range: `bytes=${range.start}-${range.end}` } : {}) }));
        // In Node the SDK's body is an http.IncomingMessage.
        return res.Body as Readable;
      } catch (err) {
        if (isMissing(err)) return undefined;
        throw err;
      }
    },
    async size(key) {
      const { sdk, client } = await s3();
      try {
        const res = await client.send(new sdk.HeadObjectCommand({ Bucket, Key: prefix + key }));
        return res.ContentLength;
      } catch (err) {
        if (isMissing(err)) return undefined;
        throw err;
      }
    },
    async delete(key) {
      const keys = [key, ...(key.startsWith('o/') ? await list(`r/${key.slice(2)}/`) : [])];
      const { sdk, client } = await s3();
      for (let i = 0; i < keys.length; i += 1000) {
        await client.send(new sdk.DeleteObjectsCommand({ Bucket, Delete: { Objects: keys.slice(i, i + 1000).map((k) => ({ Key: prefix + k })) } }));
      }
    },
    list,
    entries,
    close() {
      closed = true;
      opened?.destroy();
    },
  };
}
