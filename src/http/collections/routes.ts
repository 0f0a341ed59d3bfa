// The HTTP side of collections: the public documents a contract's tokenURI / contractURI point at
// (published collections only, cacheable), and the upload of an asset's bytes (multipart form, as
// Sequence's builder sends, or the raw file).

import type { FastifyInstance, FastifyReply, FastifyRequest } from 'fastify';
import { z } from 'zod';
import { parseCollectionPath, type CollectionsService } from '../../collections/index.ts';
import type { AccessPipeline } from '../core/access-pipeline.ts';
import { etagOf } from '../core/access-pipeline.ts';
import { MetadataErrors, RpcError, metadataAccessErrors } from '../core/errors.ts';
import { assetWire, actorOf, refusals } from './wire.ts';
import { TokenIdString } from '../core/args.ts';
import { describeIssues, sendError } from '../core/webrpc.ts';

const NOT_FOUND = { ...MetadataErrors.NotFound, status: 404 };
// Room for the multipart envelope around a file of the largest allowed size.
const MULTIPART_SLACK = 64 * 1024;

const Id = z.coerce.number().int().positive().max(Number.MAX_SAFE_INTEGER);
const UploadParams = z.object({ projectId: Id, collectionId: Id, tokenId: TokenIdString.optional(), assetId: Id });

async function fileOf(req: FastifyRequest): Promise<{ bytes: Buffer; filename: string | null }> {
  const body = req.body as Buffer | undefined;
  const ctype = String(req.headers['content-type'] ?? '');
  if (!/^multipart\/form-data/i.test(ctype)) return { bytes: body ?? Buffer.alloc(0), filename: null };
  let form: FormData;
  try {
    // The platform's multipart parser (undici), on the bytes already read under the route's limit.
    form = await new Response(body ? new Blob([new Uint8Array(body)]) : null, { headers: { 'content-type': ctype } }).formData();
  } catch (err) {
    throw new RpcError(MetadataErrors.InvalidArgument, `not a readable multipart form: ${(err as Error).message}`);
  }
  const file = form.get('file') ?? [...form.values()].find((v) => typeof v !== 'string');
  if (!file || typeof file === 'string') throw new RpcError(MetadataErrors.RequiredArgument, 'the form has no file: send it in the "file" field');
  return { bytes: Buffer.from(await file.arrayBuffer()), filename: file.name ? file.name.replace(/[^\w.-]/g, '_').slice(0, 200) : null };
}

export function registerCollectionRoutes(app: FastifyInstance, svc: CollectionsService, access: AccessPipeline, maxBytes: number) {
  // Public documents: what a published collection serves to wallets, marketplaces and our own metadata service.
  app.get('/projects/*', async (req: FastifyRequest, reply: FastifyReply) => {
    const path = parseCollectionPath(req.url.split('?')[0]);
    if (!path) return sendError(reply, NOT_FOUND, 'not a collection URL: /projects/<id>/collections/<id>[/tokens/<tokenId>[.json]]');
    const doc = path.tokenId === null ? await svc.publicContract(path.projectId, path.collectionId) : await svc.publicToken(path.projectId, path.collectionId, path.tokenId);
    reply.header('Cache-Control', 'public, max-age=60');
    if (!doc) return sendError(reply, NOT_FOUND, path.tokenId === null ? 'no published collection here' : 'no published token here');
    const body = JSON.stringify(doc);
    const etag = etagOf(body);
    reply.header('ETag', etag);
    if (req.headers['if-none-match'] === etag) return reply.code(304).send();
    return reply.type('application/json; charset=utf-8').send(body);
  });

  app.register(async (scope) => {
    scope.removeAllContentTypeParsers();
    scope.addContentTypeParser('*', { parseAs: 'buffer', bodyLimit: maxBytes + MULTIPART_SLACK }, (_req, body, done) => done(null, body));
    scope.setErrorHandler((err: Error & { code?: string; statusCode?: number }, _req, reply) => {
      if (err.code === 'FST_ERR_CTP_BODY_TOO_LARGE') return sendError(reply, { ...MetadataErrors.InvalidArgument, status: 413 }, `TOO_LARGE: the upload is larger than ${maxBytes} bytes`);
      if ((err.statusCode ?? 500) < 500) return sendError(reply, { ...MetadataErrors.InvalidArgument, status: err.statusCode ?? 400 }, err.message);
      throw err;
    });
    const upload = async (req: FastifyRequest, reply: FastifyReply) => {
      try {
        const caller = await access.admit(req, { mode: 'secret', errors: metadataAccessErrors, queryKey: false, networks: () => [], sendReused: () => reply });
        const parsed = UploadParams.safeParse(req.params);
        if (!parsed.success) throw new RpcError(MetadataErrors.InvalidArgument, describeIssues(parsed.error, req.params).text);
        const p = parsed.data;
        const { bytes, filename } = await fileOf(req);
        const asset = await refusals(() =>
          svc.upload(actorOf({ admin: caller.admin === true, project: caller.project }), p.projectId, { collectionId: p.collectionId, tokenId: p.tokenId ?? '', assetId: p.assetId }, bytes, filename),
        );
        return reply.type('application/json').send(JSON.stringify({ asset: assetWire(svc, asset) }));
      } catch (err) {
        if (err instanceof RpcError) return sendError(reply, err.def, err.detail, err.headers);
        throw err;
      }
    };
    for (const url of ['/projects/:projectId/collections/:collectionId/tokens/:tokenId/upload/:assetId', '/projects/:projectId/collections/:collectionId/upload/:assetId']) {
      scope.put(url, upload);
      scope.post(url, upload);
    }
  });
}
