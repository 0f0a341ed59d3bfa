import type { Address } from 'viem';
import type { ChainClient } from '../../chain/client.ts';
import type { FastifyInstance, FastifyReply, FastifyRequest } from 'fastify';
import { z } from 'zod';
import type { Services } from '../../services.ts';
import { TokenMetadataWire } from '../../metadata/tokens/token-view.ts';
import { ContractInfoWire } from '../../metadata/contracts/contract-view.ts';
import { networksNamed } from '../../access/allowed-networks.ts';
import type { ReusableAnswer } from '../../access/response-cache.ts';
import { callerOf, etagOf, keep, type AccessPipeline, type AccessRequest } from '../core/access-pipeline.ts';
import { MetadataErrors, RpcError, metadataAccessErrors, metadataErrorMap, type ErrorDef } from '../core/errors.ts';
import { AddressArg, TokenIdString, chainFor, type ChainArgDeps } from '../core/args.ts';
import { LIMITS } from './metadata.ts';
import { fetchCallerOf, readTokens, type TokenReadDeps } from './token-reads.ts';
import type { MetadataReadShares } from './read-shares.ts';
import { describeIssues, sendError } from '../core/webrpc.ts';
import { READS_ROUTE, SETTLED_CACHE_CONTROL, matchesEtag, restReuseKey, reusedHeaders } from '../core/reuse.ts';

/** What the REST routes and explainToken use: token reads, the contract service, and the chain lookup. */
export type RestDeps = ChainArgDeps & TokenReadDeps & Pick<Services, 'contracts'>;

/** Route schemas: the same objects validate requests and generate /openapi.json. */
export const TokenParams = z.object({
  network: z.string().min(1).describe('chain id or name, e.g. 1, mainnet, polygon'),
  contract: AddressArg.describe('contract address'),
  ids: z
    .string()
    .describe(`token ids, comma-separated (decimal or 0x hex; at most ${LIMITS.tokensPerCall})`)
    .transform((s) =>
      s
        .split(',')
        .map((x) => x.trim())
        .filter((x) => x !== ''),
    )
    .pipe(z.array(TokenIdString).min(1, 'at least one token id').max(LIMITS.tokensPerCall, `at most ${LIMITS.tokensPerCall} token ids per request`)),
});

export const ContractParams = z.object({
  network: z.string().min(1).describe('chain id or name, e.g. 1, mainnet, polygon'),
  contract: AddressArg.describe('contract address'),
});

export const ExplainParams = z.object({
  network: z.string().min(1),
  contract: AddressArg,
  id: TokenIdString,
});

export const AccessKeyQuery = z.object({ accessKey: z.string().optional().describe('access key, instead of the X-Access-Key header') });

export const TokenExplanation = z.object({
  chainId: z.number().int(),
  contractAddress: z.string(),
  tokenId: z.string(),
  status: z.enum(['NOT_AVAILABLE', 'REFRESHING', 'AVAILABLE']),
  tokenUri: z.string().nullable(),
  fetchCount: z.number().int(),
  lastAttempt: z.string().nullable(),
  lastFetched: z.string().nullable(),
  failureReason: z.string().nullable(),
  failureMessage: z.string().nullable(),
  trace: z.unknown().describe('block, URI method, decoder, {id} spelling and every URL tried with status, bytes and ms'),
  raw: z.unknown().describe('the document exactly as the origin served it'),
});

/** How a token was resolved (REST explain, and the console's token lookup). */
export async function explainToken(s: RestDeps, chain: ChainClient, contract: Address, id: string): Promise<z.infer<typeof TokenExplanation>> {
  const rec = await s.tokens.explain(chain, contract, id);
  if (!rec) throw new RpcError(MetadataErrors.NotFound, 'token could not be resolved');
  return {
    chainId: chain.chainId,
    contractAddress: contract,
    tokenId: id,
    status: rec.metadata ? 'AVAILABLE' : 'NOT_AVAILABLE',
    tokenUri: rec.tokenUri,
    fetchCount: rec.fetchCount,
    lastAttempt: rec.lastAttempt?.toISOString() ?? null,
    lastFetched: rec.lastFetched?.toISOString() ?? null,
    failureReason: rec.failureReason,
    failureMessage: rec.failureMessage,
    trace: rec.trace,
    raw: rec.raw,
  };
}

function parseOrThrow<T extends z.ZodType>(schema: T, input: unknown): z.infer<T> {
  const r = schema.safeParse(input);
  if (!r.success) {
    const { missing, text } = describeIssues(r.error, input);
    throw new RpcError(missing ? MetadataErrors.RequiredArgument : MetadataErrors.InvalidArgument, text);
  }
  return r.data;
}

function notModified(req: FastifyRequest, etag: string): boolean {
  return matchesEtag(req.headers['if-none-match'], etag);
}

/** Settled answers can be cached by browsers and CDNs; ones still resolving must be asked again soon. */
function sendCacheable(req: FastifyRequest, reply: FastifyReply, body: string, settled: boolean) {
  const etag = etagOf(body);
  reply.header('Cache-Control', settled ? SETTLED_CACHE_CONTROL : 'public, max-age=5');
  reply.header('ETag', etag);
  if (notModified(req, etag)) return reply.code(304).send();
  return reply.type('application/json').send(body);
}

/** A reusable answer, fresh or from the response cache: only settled answers are reusable. */
function sendReused(req: FastifyRequest, reply: FastifyReply, answer: Pick<ReusableAnswer, 'body' | 'etag'>) {
  const { status, headers } = reusedHeaders(answer.etag!, req.headers['if-none-match']);
  reply.code(status).headers(headers);
  return status === 304 ? reply.send() : reply.send(answer.body);
}

/** `shares`: the process's shares of metadata reads (read-shares.ts): a REST read spends what the RPC method it answers would. */
export function registerRestRoutes(app: FastifyInstance, s: RestDeps, access: AccessPipeline, shares: MetadataReadShares) {
  const errors = metadataAccessErrors;
  const refuse = (reply: FastifyReply, err: RpcError) => sendError(reply, err.def as ErrorDef, err.detail, err.headers);
  const describe =
    (reusable: boolean) =>
    (req: FastifyRequest): AccessRequest => ({
      mode: s.config.auth.rest,
      errors,
      queryKey: true,
      networks: () => networksNamed(req.params as Record<string, string>, undefined),
      reuseKey: reusable ? restReuseKey(req.url) : undefined,
      sendReused,
    });
  const reads = access.hooks(describe(true), refuse);
  const others = access.hooks(describe(false), refuse);
  const handle = (fn: (req: FastifyRequest, reply: FastifyReply) => Promise<unknown>) => async (req: FastifyRequest, reply: FastifyReply) => {
    try {
      return await fn(req, reply);
    } catch (err) {
      if (err instanceof RpcError) return refuse(reply, err);
      throw err;
    }
  };

  // The id list is a wildcard, not a `:ids` parameter: the router refuses a parameter longer than
  // 100 characters with 414, and a list of up to 100 ids is far longer than that. `:id/explain`
  // still wins for explain URLs, since the router tries parameters before the wildcard.
  app.get(
    READS_ROUTE,
    reads,
    handle(async (req, reply) => {
      const { '*': ids, ...rest } = req.params as Record<string, string>;
      const p = parseOrThrow(TokenParams, { ...rest, ids });
      const chain = chainFor(s, p.network, metadataErrorMap);
      const r = await shares.run(req, 'GetTokenMetadata', { tokenIDs: p.ids }, () =>
        readTokens(s, chain, p.contract, p.ids, fetchCallerOf(s, callerOf(req).keyId, req.ip), MetadataErrors.RateLimited),
      );
      const body = `[${r.json.join(',')}]`;
      if (r.reusableUntil) {
        const answer = { body: Buffer.from(body, 'utf8'), etag: etagOf(body) };
        keep(reply, { until: r.reusableUntil, isCurrent: r.isCurrent, tokens: r.json.length, etag: answer.etag });
        return sendReused(req, reply, answer);
      }
      return sendCacheable(req, reply, body, !r.pending && r.statuses.every((st) => st === 'AVAILABLE'));
    }),
  );

  app.get(
    '/tokens/:network/:contract',
    others,
    handle(async (req, reply) => {
      const p = parseOrThrow(ContractParams, req.params);
      const chain = chainFor(s, p.network, metadataErrorMap);
      const { infos, pending } = await shares.run(req, 'GetContractInfo', {}, () => s.contracts.get(chain, [p.contract], { eager: callerOf(req).keyId !== null }));
      const body = JSON.stringify(infos.get(p.contract));
      return sendCacheable(req, reply, body, !pending);
    }),
  );

  app.get(
    '/tokens/:network/:contract/:id/explain',
    others,
    handle(async (req, reply) => {
      const p = parseOrThrow(ExplainParams, req.params);
      const chain = chainFor(s, p.network, metadataErrorMap);
      const out = await shares.run(req, 'GetTokenMetadata', { tokenIDs: [p.id] }, () => explainToken(s, chain, p.contract, p.id));
      reply.header('Cache-Control', 'no-store');
      return reply.send(out);
    }),
  );
}

/** OpenAPI 3 for the REST form, generated from the route schemas above. */
export function openApiDocument(version: string) {
  const json = (schema: z.ZodType) => z.toJSONSchema(schema, { target: 'openapi-3.0', io: 'input', unrepresentable: 'any' });
  const out = (schema: z.ZodType) => z.toJSONSchema(schema, { target: 'openapi-3.0', io: 'output', unrepresentable: 'any' });
  const pathParams = (schema: z.ZodObject) =>
    Object.entries((json(schema) as { properties: Record<string, { description?: string }> }).properties).map(([name, sch]) => ({
      name,
      in: 'path',
      required: true,
      description: sch.description,
      schema: { type: 'string' },
    }));
  const query = [{ name: 'accessKey', in: 'query', required: false, schema: { type: 'string' }, description: AccessKeyQuery.shape.accessKey.description }];
  const errorResponse = {
    description: 'webrpc error',
    content: {
      'application/json': {
        schema: {
          type: 'object',
          properties: { error: { type: 'string' }, code: { type: 'integer' }, msg: { type: 'string' }, message: { type: 'string' }, cause: { type: 'string' }, status: { type: 'integer' } },
        },
      },
    },
  };
  return {
    openapi: '3.0.3',
    info: { title: 'metarelay REST API', version },
    paths: {
      '/tokens/{network}/{contract}': {
        get: {
          summary: 'Contract info (ERC20, ERC721, ERC1155): name, type, symbol, decimals, logo, extensions',
          parameters: [...pathParams(ContractParams), ...query],
          responses: {
            200: { description: 'one ContractInfo', content: { 'application/json': { schema: out(ContractInfoWire) } } },
            304: { description: 'not modified (If-None-Match)' },
            400: errorResponse,
            401: errorResponse,
          },
        },
      },
      '/tokens/{network}/{contract}/{ids}': {
        get: {
          summary: 'Token metadata of one or more tokens of a contract, in request order',
          parameters: [...pathParams(TokenParams), ...query],
          responses: {
            200: {
              description: 'one TokenMetadata per requested id',
              headers: { ETag: { schema: { type: 'string' } }, 'Cache-Control': { schema: { type: 'string' } } },
              content: { 'application/json': { schema: { type: 'array', items: out(TokenMetadataWire) } } },
            },
            304: { description: 'not modified (If-None-Match)' },
            400: errorResponse,
            401: errorResponse,
          },
        },
      },
      '/tokens/{network}/{contract}/{id}/explain': {
        get: {
          summary: 'How one token was resolved: URI read on chain, every URL tried, why it failed',
          parameters: [...pathParams(ExplainParams), ...query],
          responses: { 200: { description: 'resolution trace', content: { 'application/json': { schema: out(TokenExplanation) } } }, 400: errorResponse, 401: errorResponse },
        },
      },
    },
  };
}
