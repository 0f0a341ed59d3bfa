// The console's picture upload: a file dropped on a token goes here as the raw request body (so the
// page can show the upload's progress), into the token's asset slot for the field, through the same
// CollectionsService.upload as the Collections upload route (the media pipeline's rules, quotas, the
// project's upload rate). The console's own access rule: an admin session cookie or admin token.

import type { FastifyInstance, FastifyReply, FastifyRequest } from 'fastify';
import { z } from 'zod';
import type { CollectionsService } from '../collections/index.ts';
import { MetadataErrors, RpcError, TokenIdString, describeIssues, refusals, sendError } from '../http/index.ts';
import { admitConsoleRequest } from './access.ts';
import type { AdminTokenStore } from '../access/admin-tokens.ts';
import { blobPicture } from './methods/media.ts';
import type { SessionStore } from './sessions.ts';

/** A token's file, and the collection's own (its picture in the contractURI document). */
export const CONSOLE_UPLOAD_PATHS = ['/console/upload/projects/:projectId/collections/:collectionId/tokens/:tokenId/:field', '/console/upload/projects/:projectId/collections/:collectionId/:field'];

const OPERATOR = { admin: true } as const;
const Id = z.coerce.number().int().positive().max(Number.MAX_SAFE_INTEGER);
const Params = z.object({
  projectId: Id,
  collectionId: Id,
  tokenId: TokenIdString.optional(),
  field: z.string().regex(/^[a-z][a-z0-9_]{0,39}$/, 'a metadata field name: lower case letters, digits and _ (e.g. image, animation_url)'),
});
const Query = z.object({
  filename: z
    .string()
    .max(200)
    .transform((n) => n.replace(/[^\w.-]/g, '_'))
    .optional(),
});

export function registerConsoleUploads(app: FastifyInstance, svc: CollectionsService, access: { sessions: SessionStore; tokens: AdminTokenStore }, maxBytes: number) {
  app.register(async (scope) => {
    scope.removeAllContentTypeParsers();
    scope.addContentTypeParser('*', { parseAs: 'buffer', bodyLimit: maxBytes }, (_req, body, done) => done(null, body));
    scope.setErrorHandler((err: Error & { code?: string; statusCode?: number }, _req, reply) => {
      if (err.code === 'FST_ERR_CTP_BODY_TOO_LARGE')
        return sendError(reply, { ...MetadataErrors.InvalidArgument, status: 413 }, `TOO_LARGE: the file is larger than ${maxBytes} bytes (media.maxBytes)`);
      if ((err.statusCode ?? 500) < 500) return sendError(reply, { ...MetadataErrors.InvalidArgument, status: err.statusCode ?? 400 }, err.message);
      throw err;
    });
    const upload = async (req: FastifyRequest, reply: FastifyReply) => {
      try {
        await admitConsoleRequest(access.sessions, access.tokens, req);
        const params = Params.safeParse(req.params);
        if (!params.success) throw new RpcError(MetadataErrors.InvalidArgument, describeIssues(params.error, req.params).text);
        const query = Query.safeParse(req.query);
        if (!query.success) throw new RpcError(MetadataErrors.InvalidArgument, describeIssues(query.error, req.query).text);
        const { projectId, collectionId, field } = params.data;
        // '' is the collection's own asset, as in the Collections service.
        const tokenId = params.data.tokenId ?? '';
        const filename = query.data.filename ?? null;
        const bytes = (req.body as Buffer | undefined) ?? Buffer.alloc(0);
        const assets = tokenId
          ? (await refusals(() => svc.token(OPERATOR, projectId, collectionId, tokenId))).assets
          : await refusals(async () => svc.collectionAssets((await svc.collection(OPERATOR, collectionId, projectId)).id));
        const slot = assets.find((a) => a.metadataField === field);
        const asset = slot ?? (await refusals(() => svc.createAsset(OPERATOR, projectId, { collectionId, tokenId, metadataField: field, filename })));
        let stored: Awaited<ReturnType<CollectionsService['upload']>>;
        try {
          stored = await refusals(() => svc.upload(OPERATOR, projectId, { collectionId, tokenId, assetId: asset.id }, bytes, filename));
        } catch (err) {
          // A refused file leaves nothing behind: the slot made for it goes too (one that held a file keeps it).
          if (!slot) await svc.deleteAsset(OPERATOR, projectId, asset.id).catch(() => undefined);
          throw err;
        }
        return reply.type('application/json').send(JSON.stringify({ field, filename: stored.filename, picture: stored.blob ? blobPicture(field, stored.blob) : null }));
      } catch (err) {
        if (err instanceof RpcError) return sendError(reply, err.def, err.detail, err.headers);
        throw err;
      }
    };
    for (const path of CONSOLE_UPLOAD_PATHS) scope.put(path, upload);
  });
}
