import type { FastifyInstance, FastifyReply, FastifyRequest } from 'fastify';
import { z } from 'zod';
import type { Project } from '../store/projects.ts';
import type { Metrics } from '../telemetry/metrics.ts';
import { redactSecrets } from '../telemetry/redact.ts';
import { readAccessKey, readBearer, type AuthOutcome, type Authenticator } from './auth.ts';
import { RpcError, WebrpcErrors, toWire, type ErrorDef, type ServiceErrorMap } from './errors.ts';
import type { RateLimiter } from './rate-limit.ts';
import type { NetworkRegistry } from '../chain/registry.ts';
import { checkAllowedNetworks, networksNamed } from './allowed-networks.ts';
import { countReused, sendJsonBytes, type ResponseCache } from './response-cache.ts';

/** `admin`: an operator token (Authorization: Bearer); a project access key never passes. */
export type AuthMode = 'none' | 'optional' | 'required' | 'admin';

export interface RpcContext {
  project: Project | null;
  keyId: number | null;
  params: Record<string, string>;
  request: FastifyRequest;
  reply: FastifyReply;
}

export interface MethodDef<S extends z.ZodType = z.ZodType> {
  input: S;
  /** Overrides the service's default access rule for this method. */
  auth?: AuthMode;
  /**
   * An idempotent read whose answer depends on nothing but its arguments: the same body from the
   * same caller may be answered from the service's response cache, when the handler's answer was
   * a ReusableJson. Never for admin methods.
   */
  reusable?: boolean;
  handler: (args: z.infer<S>, ctx: RpcContext) => Promise<unknown>;
}

/** Keeps each method's argument type tied to its schema. */
export function method<S extends z.ZodType>(def: MethodDef<S>): MethodDef<S> {
  return def;
}

export interface ServiceDef {
  name: string;
  /** e.g. `sequence-metadata@v0.4.0`, sent in the Webrpc response header. */
  schema: string;
  errors: ServiceErrorMap;
  methods: Record<string, MethodDef<any>>;
  /** Access rule for methods that do not set their own. */
  defaultAuth: (methodName: string) => AuthMode;
  /** Runs before the method, e.g. to resolve a path parameter; may throw RpcError. */
  prepare?: (ctx: RpcContext) => Promise<void> | void;
  /**
   * Where `reusable` methods keep their answers. Not used by a service with `prepare`: what
   * prepare puts in the context is not part of the cache key.
   */
  responseCache?: ResponseCache;
}

/** A handler's answer already serialised: sent as is, skipping JSON.stringify on hot paths. */
export class RawJson {
  constructor(readonly text: string) {}
}

/** A RawJson the router may give again, to the same caller for the same body, until `until` (epoch ms). */
export class ReusableJson extends RawJson {
  constructor(
    text: string,
    readonly until: number,
    readonly isCurrent: () => boolean,
    /** Tokens in the answer, for the cache-lookup metric. */
    readonly tokens: number,
  ) {
    super(text);
  }
}

export const WEBRPC_VERSION = 'webrpc@v0.31.0;metarelay@v0.1.0';

export interface WebrpcDeps {
  auth: Authenticator;
  /** Admin bearer tokens: the config's, and those `metarelay admin create` stored (hashed). */
  admin: { verify(token: string | undefined): boolean | Promise<boolean> };
  metrics: Metrics;
  /** Spends a token of the caller's access key per request (keys with a rate limit only). */
  rateLimit?: RateLimiter;
  /** Resolves the networks a request names, to hold a project's key to its allowed networks. */
  networks?: NetworkRegistry;
}

/** Go clients send null for absent optionals: a null and a missing key mean the same. */
export function stripNulls(v: unknown): unknown {
  if (Array.isArray(v)) return v.map((x) => (x === null ? x : stripNulls(x)));
  if (v && typeof v === 'object') {
    const out: Record<string, unknown> = {};
    for (const [k, x] of Object.entries(v)) if (x !== null) out[k] = stripNulls(x);
    return out;
  }
  return v;
}

function valueAt(obj: unknown, path: PropertyKey[]): unknown {
  let cur = obj;
  for (const p of path) {
    if (cur == null || typeof cur !== 'object') return undefined;
    cur = (cur as Record<PropertyKey, unknown>)[p];
  }
  return cur;
}

export function describeIssues(error: z.ZodError, input: unknown): { missing: boolean; text: string } {
  let missing = false;
  const parts = error.issues.slice(0, 5).map((i) => {
    const path = i.path.map(String).join('.') || '(body)';
    if (i.code === 'invalid_type' && valueAt(input, i.path) === undefined) {
      missing = true;
      return `${path}: required`;
    }
    return `${path}: ${i.message}`;
  });
  return { missing, text: parts.join('; ') };
}

export function sendError(reply: FastifyReply, def: ErrorDef, cause?: string, headers: Record<string, string> = {}) {
  for (const [k, v] of Object.entries(headers)) reply.header(k, v);
  // A cause can quote the request (a JSON parse error shows the body around the fault): no key in it.
  return reply.code(def.status).type('application/json').send(toWire(def, cause === undefined ? cause : redactSecrets(cause)));
}

function mediaType(req: FastifyRequest): string {
  return String(req.headers['content-type'] ?? '').split(';')[0].trim().toLowerCase();
}

/**
 * Who the answer is for, as part of a response-cache key; undefined when the access check is going
 * to refuse the request, so nothing is looked up for it.
 */
function principalOf(mode: AuthMode, outcome: AuthOutcome | undefined): string | undefined {
  if (mode === 'none') return '-';
  if (!outcome || outcome.kind === 'invalid') return undefined;
  if (outcome.kind === 'ok') return `k${outcome.keyId}`;
  return mode === 'optional' ? 'anon' : undefined;
}

function parseBody(req: FastifyRequest): unknown {
  const raw = req.body as Buffer | undefined;
  const text = raw && raw.length ? raw.toString('utf8').trim() : '';
  if (text === '' || text === 'null') return {};
  const ctype = mediaType(req);
  if (ctype !== 'application/json') {
    throw new RpcError(WebrpcErrors.WebrpcBadRequest, `unsupported Content-Type "${ctype}", expected application/json`);
  }
  let parsed: unknown;
  try {
    parsed = JSON.parse(text);
  } catch (err) {
    throw new RpcError(WebrpcErrors.WebrpcBadRequest, `failed to unmarshal request data: ${(err as Error).message}`);
  }
  if (typeof parsed !== 'object' || Array.isArray(parsed)) {
    throw new RpcError(WebrpcErrors.WebrpcBadRequest, 'failed to unmarshal request data: body must be a JSON object');
  }
  return stripNulls(parsed);
}

/**
 * Mounts one webrpc service at `${routePrefix}:method`: POST only, JSON in and out,
 * errors in the webrpc wire shape with the service's own codes.
 */
export async function registerWebrpcService(app: FastifyInstance, routePrefix: string, service: ServiceDef, deps: WebrpcDeps) {
  await app.register(async (scope) => {
    // Parse bodies ourselves: the webrpc rules on content type and empty bodies differ from fastify's.
    scope.removeAllContentTypeParsers();
    scope.addContentTypeParser('*', { parseAs: 'buffer' }, (_req, body, done) => done(null, body));

    const url = `${routePrefix}:method`;
    const headerValue = `${WEBRPC_VERSION};${service.schema}`;
    const cache = service.responseCache?.enabled && !service.prepare ? service.responseCache : undefined;

    scope.route({
      method: ['GET', 'PUT', 'DELETE', 'PATCH'],
      url,
      handler: (_req, reply) => {
        reply.header('Webrpc', headerValue).header('Allow', 'POST');
        return sendError(reply, WebrpcErrors.WebrpcBadMethod, 'only POST is allowed');
      },
    });

    scope.post(url, async (req, reply) => {
      reply.header('Webrpc', headerValue);
      const params = req.params as Record<string, string>;
      const name = params.method;
      const def = Object.hasOwn(service.methods, name) ? service.methods[name] : undefined;
      const started = process.hrtime.bigint();
      let code = 0;
      try {
        if (!def) throw new RpcError(WebrpcErrors.WebrpcBadRoute, `no webrpc method defined for path ${req.url.split('?')[0]}`);
        const mode = def.auth ?? service.defaultAuth(name);
        let outcome: AuthOutcome | undefined;
        let cacheKey: string | undefined;
        let admitted = false;
        if (cache && def.reusable && mode !== 'admin') {
          // Only a body the parser accepts can have been stored, so a hit needs no parse; a miss
          // goes on below, where a bad body still gets WebrpcBadRequest before any access error.
          const raw = req.body as Buffer | undefined;
          if (raw && raw.length && raw.length < cache.maxKeyLength && mediaType(req) === 'application/json') {
            if (mode !== 'none') {
              const key = readAccessKey(req, false);
              outcome = deps.auth.authenticateCached(key) ?? (await deps.auth.authenticate(key));
            }
            // A project held to some networks is checked against the body, so it skips the cache.
            const restricted = outcome?.kind === 'ok' && outcome.project.allowedChainIds !== null;
            const principal = restricted ? undefined : principalOf(mode, outcome);
            if (principal !== undefined) {
              // A cached answer is still a request: it spends from the key's bucket like any other.
              const waiting = deps.rateLimit?.admit(outcome, service.errors.rateLimited);
              if (waiting) await waiting;
              admitted = true;
              cacheKey = `${service.name}/${name}\n${principal}\n${raw.toString('latin1')}`;
              const hit = cache.get(cacheKey, Date.now());
              if (hit) {
                countReused(deps.metrics, hit);
                return sendJsonBytes(reply, hit.body);
              }
            }
          }
        }
        const body = parseBody(req);
        const ctx: RpcContext = { project: null, keyId: null, params, request: req, reply };
        if (mode === 'admin') {
          if (!(await deps.admin.verify(readBearer(req)))) {
            if (readBearer(req)) throw new RpcError(service.errors.unauthorized, 'invalid admin token');
            if (readAccessKey(req, false)) throw new RpcError(service.errors.permissionDenied, 'a project access key cannot call the admin API');
            throw new RpcError(service.errors.unauthorized, 'admin token required: Authorization: Bearer <token>');
          }
        } else if (mode !== 'none') {
          if (!outcome) {
            const key = readAccessKey(req, false);
            outcome = deps.auth.authenticateCached(key) ?? (await deps.auth.authenticate(key));
          }
          if (outcome.kind === 'invalid') throw new RpcError(service.errors.unauthorized, 'invalid access key');
          if (outcome.kind === 'none' && mode === 'required') {
            throw new RpcError(service.errors.unauthorized, 'access key required: send it in the X-Access-Key header');
          }
          if (outcome.kind === 'ok') {
            const waiting = admitted ? undefined : deps.rateLimit?.admit(outcome, service.errors.rateLimited);
            if (waiting) await waiting;
            ctx.project = outcome.project;
            ctx.keyId = outcome.keyId;
          }
        }
        if (ctx.project?.allowedChainIds && deps.networks) {
          checkAllowedNetworks(ctx.project, deps.networks, networksNamed(params, body), service.errors.networkNotAllowed);
        }
        await service.prepare?.(ctx);
        const parsed = def.input.safeParse(body);
        if (!parsed.success) {
          const { missing, text } = describeIssues(parsed.error, body);
          throw new RpcError(missing ? service.errors.requiredArgument : service.errors.invalidArgument, text);
        }
        const out = await def.handler(parsed.data, ctx);
        if (cacheKey !== undefined && out instanceof ReusableJson) {
          const bytes = Buffer.from(out.text, 'utf8');
          cache!.set(cacheKey, { body: bytes, until: out.until, isCurrent: out.isCurrent, tokens: out.tokens }, Date.now());
          return sendJsonBytes(reply, bytes);
        }
        return reply.code(200).type('application/json').send(out instanceof RawJson ? out.text : JSON.stringify(out ?? {}));
      } catch (err) {
        if (err instanceof RpcError) {
          code = err.def.code;
          return sendError(reply, err.def, err.detail, err.headers);
        }
        code = WebrpcErrors.WebrpcInternalError.code;
        req.log.error({ err, method: name }, 'unhandled error in rpc method');
        return sendError(reply, WebrpcErrors.WebrpcInternalError, `internal error (request ${req.id})`);
      } finally {
        const label = def ? name : 'unknown';
        deps.metrics.rpcRequests.inc({ service: service.name, method: label, code: String(code) });
        deps.metrics.rpcDuration.observe({ service: service.name, method: label }, Number(process.hrtime.bigint() - started) / 1e9);
      }
    });
  });
}
