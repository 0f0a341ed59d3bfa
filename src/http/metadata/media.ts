// Media routes. Content-addressed blobs (/media/b/<sha256>/<rendition>) are immutable and public;
// the per-token route (/media/<network>/<contract>/<tokenId>/<field>) resolves the token, fetches
// its media if needed (lazily) and redirects to the blob. Every media answer carries headers that
// stop a browser from treating the bytes as anything but what we say (nosniff, a sandboxing CSP),
// and a failed asset is a 404 with its reason, never an image with 200.

import type { FastifyInstance, FastifyReply, FastifyRequest } from 'fastify';
import { z } from 'zod';
import type { Services } from '../../services.ts';
import { CONTRACT_MEDIA_FIELDS, MEDIA_FIELDS, formatFor, isImage, parseRendition, snapWidth, type BlobInfo, type MediaService } from '../../media/index.ts';
import { networksNamed } from '../../access/allowed-networks.ts';
import type { AccessPipeline } from '../core/access-pipeline.ts';
import { MetadataErrors, RpcError, metadataAccessErrors, metadataErrorMap, toWire, type ErrorDef } from '../core/errors.ts';
import { AddressArg, TokenIdString, chainFor, type ChainArgDeps } from '../core/args.ts';
import { chargeFetch, fetchCallerOf, readTokens, type TokenReadDeps } from './token-reads.ts';
import type { FetchCaller } from '../../metadata/tokens/fetch-shares.ts';
import { describeIssues, sendError } from '../core/webrpc.ts';

/** What the media routes use: the media service, the contract service, token reads, and the chain lookup. */
export type MediaRouteDeps = ChainArgDeps & TokenReadDeps & Pick<Services, 'media' | 'contracts'>;

export const MEDIA_SECURITY_HEADERS = {
  'X-Content-Type-Options': 'nosniff',
  'Content-Security-Policy': "default-src 'none'; style-src 'unsafe-inline'; sandbox",
} as const;

const IMMUTABLE = 'public, max-age=31536000, immutable';
const HOT_HEADERS = { ...MEDIA_SECURITY_HEADERS, 'cache-control': IMMUTABLE };
const HOT_NAME = /^(64|256|512|1024)(-still)?\.(webp|png|jpg)$/;
const SHA256_HEX = /^[0-9a-f]{64}$/;
const HOT_TYPES: Record<string, string> = { webp: 'image/webp', png: 'image/png', jpg: 'image/jpeg' };

const TokenMediaParams = z.object({
  network: z.string().min(1),
  contract: AddressArg,
  tokenId: TokenIdString,
  field: z.enum(MEDIA_FIELDS),
});

const ContractMediaParams = z.object({
  network: z.string().min(1),
  contract: AddressArg,
  field: z.enum(CONTRACT_MEDIA_FIELDS),
});

const WidthQuery = z.object({
  w: z.coerce.number().int('w must be an integer').min(1, 'w must be at least 1').max(10_000, 'w must be at most 10000').optional(),
  accessKey: z.string().optional(),
});

/** A media failure: 404 with the reason, in the error shape of every other answer. */
function sendFailure(reply: FastifyReply, reason: string, message: string) {
  const def: ErrorDef = { ...MetadataErrors.NotFound, status: 404 };
  reply.headers(MEDIA_SECURITY_HEADERS).header('Cache-Control', 'no-store');
  return reply
    .code(404)
    .type('application/json')
    .send({ ...toWire(def, `${reason}: ${message}`), reason });
}

function parseOrThrow<T extends z.ZodType>(schema: T, input: unknown): z.infer<T> {
  const r = schema.safeParse(input);
  if (!r.success) throw new RpcError(MetadataErrors.InvalidArgument, describeIssues(r.error, input).text);
  return r.data;
}

/** `bytes=a-b`, `bytes=a-`, `bytes=-n` (one range; several are answered whole, as RFC 9110 allows). */
function parseRange(header: string | undefined, size: number): { start: number; end: number } | 'unsatisfiable' | undefined {
  if (!header) return undefined;
  const m = /^bytes=(\d*)-(\d*)$/.exec(header.trim());
  if (!m || (m[1] === '' && m[2] === '')) return undefined;
  let start: number;
  let end: number;
  if (m[1] === '') {
    const n = Number(m[2]);
    if (n === 0) return 'unsatisfiable';
    start = Math.max(0, size - n);
    end = size - 1;
  } else {
    start = Number(m[1]);
    end = m[2] === '' ? size - 1 : Math.min(Number(m[2]), size - 1);
  }
  if (start >= size || start > end) return 'unsatisfiable';
  return { start, end };
}

const BlobParams = z.object({
  sha256: z.string().regex(/^[0-9a-f]{64}$/, 'must be a lower-case hex SHA-256'),
  rendition: z.string().max(40),
});

async function sendBlob(media: MediaService, req: FastifyRequest, reply: FastifyReply) {
  const p = BlobParams.safeParse(req.params);
  if (!p.success) return sendFailure(reply, 'INVALID_ARGUMENT', describeIssues(p.error, req.params).text);
  const { sha256, rendition } = p.data;
  const etag = `"${sha256}.${rendition}"`;
  const blob = await media.blob(sha256);
  if (!blob) return sendFailure(reply, 'UNKNOWN_BLOB', `no media with hash ${sha256}`);

  reply.headers(MEDIA_SECURITY_HEADERS);
  if (rendition === 'original') {
    if (blob.mimeType === 'image/svg+xml') return sendFailure(reply, 'SVG_NOT_SERVED', 'SVG is only served rasterised: ask for a width, e.g. 1024.webp');
    reply.header('Cache-Control', IMMUTABLE).header('ETag', etag).header('Accept-Ranges', 'bytes');
    if (req.headers['if-none-match'] === etag) {
      media.noteServed('not_modified');
      return reply.code(304).send();
    }
    const key = `o/${sha256}`;
    const range = parseRange(req.headers.range, blob.filesize);
    if (range === 'unsatisfiable') {
      return reply
        .code(416)
        .header('Content-Range', `bytes */${blob.filesize}`)
        .type('application/json')
        .send(toWire({ ...MetadataErrors.InvalidArgument, status: 416 }, 'range not satisfiable'));
    }
    // Streamed: a 50 MB video served to many clients is never held in memory.
    const body = await media.blobs.stream(key, range);
    if (!body) return sendFailure(reply, 'BLOB_MISSING', 'the original is missing from the blob store');
    const length = range ? range.end - range.start + 1 : blob.filesize;
    reply.header('Content-Length', String(length)).type(blob.mimeType);
    media.noteServed('original');
    if (range) reply.code(206).header('Content-Range', `bytes ${range.start}-${range.end}/${blob.filesize}`);
    return reply.send(body);
  }
  const r = parseRendition(rendition);
  if (!r) return sendFailure(reply, 'UNKNOWN_RENDITION', `"${rendition.slice(0, 40)}" is not a rendition: original, or <64|256|512|1024>[-still].<webp|png|jpg>`);
  if (req.headers['if-none-match'] === etag) {
    media.noteServed('not_modified');
    return reply.code(304).header('Cache-Control', IMMUTABLE).header('ETag', etag).send();
  }
  const out = await media.rendition(blob, r);
  if (!out.ok) return sendFailure(reply, out.reason, out.message);
  return reply.headers({ 'cache-control': IMMUTABLE, etag, 'content-type': out.contentType }).send(out.bytes);
}

/** A redirect to the stored blob: the original, or for images a rendition when a width is asked (SVG always). */
function redirectToBlob(reply: FastifyReply, req: FastifyRequest, b: BlobInfo, w: number | undefined) {
  let rendition = 'original';
  if (isImage(b.mimeType) && (w !== undefined || b.mimeType === 'image/svg+xml')) {
    rendition = `${snapWidth(w ?? 1024)}.${formatFor(req.headers.accept)}`;
  }
  // Where it points changes with the document and the Accept header: cacheable only briefly.
  reply.headers(MEDIA_SECURITY_HEADERS).header('Cache-Control', 'public, max-age=60').header('Vary', 'Accept');
  return reply.redirect(`/media/b/${b.sha256}/${rendition}`, 302);
}

/** A contract's logo (ContractInfo logoURI) or og:image (extensions.ogImage), fetched through the media pipeline on first request. */
async function sendContractMedia(s: MediaRouteDeps, media: MediaService, req: FastifyRequest, reply: FastifyReply, w: number | undefined, caller: FetchCaller) {
  const p = parseOrThrow(ContractMediaParams, req.params);
  const chain = chainFor(s, p.network, metadataErrorMap);
  const info = (await s.contracts.get(chain, [p.contract], { eager: !caller.keyless })).infos.get(p.contract);
  if (!info || info.status === 'NOT_AVAILABLE') return sendFailure(reply, 'CONTRACT_NOT_AVAILABLE', 'the contract has no info (yet)');
  const og = info.extensions.ogImage;
  const source = p.field === 'logo' ? info.logoURI : typeof og === 'string' ? og : '';
  if (!source) return sendFailure(reply, 'NO_MEDIA', `the contract has no ${p.field === 'logo' ? 'logoURI' : 'extensions.ogImage'}`);
  const asset = await media.ensureContract(chain.chainId, p.contract, p.field, source, { beforeFetch: () => chargeFetch(s, caller, MetadataErrors.RateLimited) });
  if (asset.status !== 'READY' || !asset.blob) return sendFailure(reply, asset.failureReason ?? 'FAILED', asset.failureMessage ?? 'media could not be stored');
  return redirectToBlob(reply, req, asset.blob, w);
}

export function registerMediaRoutes(app: FastifyInstance, s: MediaRouteDeps, access: AccessPipeline) {
  const media = s.media;
  if (!media) return;

  app.addHook('onListen', async function () {
    // Asset URLs are absolute; without media.publicUrl they name the address the service listens on.
    const addr = app.server.address();
    if (addr && typeof addr === 'object') {
      const host = addr.family === 'IPv6' ? `[${addr.address}]` : addr.address;
      media.setListeningUrl(`http://${host === '0.0.0.0' || host === '[::]' ? '127.0.0.1' : host}:${addr.port}`);
    }
  });

  app.get('/media/b/:sha256/:rendition', (req, reply) => {
    // The hot path of cached thumbnails: a rendition in memory is sent with no await and no schema
    // parse (the two values are checked by the regexes below); anything else takes the full route.
    const { sha256, rendition } = req.params as { sha256: string; rendition: string };
    if (HOT_NAME.test(rendition) && SHA256_HEX.test(sha256)) {
      const etag = `"${sha256}.${rendition}"`;
      if (req.headers['if-none-match'] !== etag) {
        const bytes = media.hotRendition(sha256, rendition);
        if (bytes) return reply.headers({ ...HOT_HEADERS, etag, 'content-type': HOT_TYPES[rendition.slice(rendition.lastIndexOf('.') + 1)] }).send(bytes);
      }
    }
    return sendBlob(media, req, reply);
  });

  app.get('/media/:network/:contract/:tokenId/:field', async (req, reply) => {
    try {
      const q = parseOrThrow(WidthQuery, req.query);
      // The REST routes' access rule, through the same pipeline (no response cache: answers are redirects).
      const admitted = await access.admit(req, {
        mode: s.config.auth.rest,
        errors: metadataAccessErrors,
        queryKey: true,
        networks: () => networksNamed(req.params as Record<string, string>, undefined),
        sendReused: () => reply,
      });
      // The token read and the media fetch are charged to the caller's share, as a token read's are.
      const caller = fetchCallerOf(s, admitted.keyId, req.ip);
      // /media/<network>/<contract>/contract/<logo|og_image>: the contract's own media, not a token's.
      if ((req.params as { tokenId?: string }).tokenId === 'contract') return await sendContractMedia(s, media, req, reply, q.w, caller);
      const p = parseOrThrow(TokenMediaParams, req.params);

      const chain = chainFor(s, p.network, metadataErrorMap);
      const token = (await readTokens(s, chain, p.contract, [p.tokenId], caller, MetadataErrors.RateLimited)).tokens[0];
      if (!token || token.status === 'NOT_AVAILABLE') return sendFailure(reply, 'TOKEN_NOT_AVAILABLE', token?.failureMessage || 'the token has no metadata (yet)');
      const source =
        p.field === 'image'
          ? token.image
          : p.field === 'animation_url'
            ? token.animation_url
            : token.image_data && `data:image/svg+xml;base64,${Buffer.from(token.image_data, 'utf8').toString('base64')}`;
      if (!source) return sendFailure(reply, 'NO_MEDIA', `the token has no ${p.field}`);
      const key = { chainId: chain.chainId, contract: p.contract, tokenId: p.tokenId, field: p.field };
      // With media.rewriteImage the answer's image is our own cached URL: the stored asset is the source.
      const asset = source.startsWith(`${media.publicUrl}/media/`)
        ? ((await media.asset(key)) ?? { status: 'FAILED' as const, blob: null, failureReason: 'NO_MEDIA', failureMessage: 'no cached media' })
        : await media.ensure(key, source, { beforeFetch: () => chargeFetch(s, caller, MetadataErrors.RateLimited) });
      if (asset.status !== 'READY' || !asset.blob) return sendFailure(reply, asset.failureReason ?? 'FAILED', asset.failureMessage ?? 'media could not be stored');
      return redirectToBlob(reply, req, asset.blob, q.w);
    } catch (err) {
      if (err instanceof RpcError) return sendError(reply, err.def as ErrorDef, err.detail, err.headers);
      throw err;
    }
  });
}
