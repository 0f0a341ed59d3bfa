import type { FastifyInstance, FastifyReply, FastifyRequest } from 'fastify';
import type { z } from 'zod';
import type { Project } from '../../store/projects.ts';
import type { Metrics } from '../../telemetry/metrics.ts';
import { redactSecrets } from '../../telemetry/redact.ts';
import { Tally } from '../../telemetry/tally.ts';
import { RpcError, WebrpcErrors, toWire, type ErrorDef, type ServiceErrorMap } from './errors.ts';
import { networksNamed } from '../../access/allowed-networks.ts';
import { callerOf, keep, type AccessPipeline, type AccessRequest, type AuthMode } from './access-pipeline.ts';
import type { ChainOutage } from '../../chain/outage.ts';
import { databaseUnavailable } from './db-outage.ts';
import { JSON_UTF8, mediaTypeOf } from './media-type.ts';
import { mayReuse, rpcReusePrefix, type EarlyRegistry, type EarlyRpcMethod } from './reuse.ts';

export type { AuthMode };

export interface RpcContext {
  project: Project | null;
  keyId: number | null;
  /** Admitted with an operator token. */
  admin: boolean;
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
   * same caller may be answered from the response cache, when the handler's answer was a
   * ReusableJson. Never for admin methods, nor in a service with `prepare` (what prepare puts in
   * the context is not part of the cache key).
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

/** A handler's answer when it took the reply over (a webrpc stream): the router sends nothing more. */
export const STREAMED = Symbol('metarelay.webrpc.streamed');

export const WEBRPC_VERSION = 'webrpc@v0.31.0;metarelay@v0.1.0';

export interface WebrpcDeps {
  /** Who may call what, and what may be answered from the response cache (shared with REST). */
  access: AccessPipeline;
  metrics: Metrics;
  /** Where calls of reusable methods are answered from the cache before routing (early-answers.ts). */
  early?: EarlyRegistry;
  /** A handler's failure that is a chain's node being unreachable: answered 503 naming the chain, not 500. */
  outage?: (err: unknown) => ChainOutage | undefined;
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

/** `chainId` sent for `chainID`: names are case-sensitive, and "required" alone does not say why. */
function spellingHint(input: unknown, path: PropertyKey[]): string {
  const key = path.at(-1);
  const parent = valueAt(input, path.slice(0, -1));
  if (typeof key !== 'string' || !parent || typeof parent !== 'object') return '';
  const near = Object.keys(parent).find((k) => k !== key && k.toLowerCase() === key.toLowerCase());
  return near ? ` (the body has "${near}": field names are case-sensitive, send "${key}")` : '';
}

export function describeIssues(error: z.ZodError, input: unknown): { missing: boolean; text: string } {
  let missing = false;
  const parts = error.issues.slice(0, 5).map((i) => {
    const path = i.path.map(String).join('.') || '(body)';
    const absent = i.path.length > 0 && valueAt(input, i.path) === undefined;
    // A refine that needs one of two spellings (taskId / taskID) says 'required' of the absent one.
    if ((i.code === 'invalid_type' || (i.code === 'custom' && i.message === 'required')) && absent) {
      missing = true;
      return `${path}: required${spellingHint(input, i.path)}`;
    }
    // Some fields (a union, a preprocessed chain name) report an absent value as "Invalid input".
    return `${path}: ${i.message}${absent ? spellingHint(input, i.path) : ''}`;
  });
  return { missing, text: parts.join('; ') };
}

export function sendError(reply: FastifyReply, def: ErrorDef, cause?: string, headers: Record<string, string> = {}) {
  for (const [k, v] of Object.entries(headers)) reply.header(k, v);
  // A cause can quote the request (a JSON parse error shows the body around the fault): no key in it.
  return reply
    .code(def.status)
    .type('application/json')
    .send(toWire(def, cause === undefined ? cause : redactSecrets(cause)));
}

function mediaType(req: FastifyRequest): string {
  return mediaTypeOf(req.headers['content-type']);
}

function parseBody(req: FastifyRequest): unknown {
  const raw = req.body as Buffer | undefined;
  const text = raw?.length ? raw.toString('utf8').trim() : '';
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

/** What the router learnt about a request, kept on it for the handler and the metrics hook. */
interface RpcState {
  name: string;
  def: MethodDef | undefined;
  started: bigint;
  code: number;
  /** The body, parsed once: by the access check (a project held to some networks) or the handler. */
  body?: unknown;
}
const RPC = Symbol('metarelay.rpc');
type RpcRequest = FastifyRequest & { [RPC]?: RpcState };

function bodyOf(req: FastifyRequest): unknown {
  const st = (req as RpcRequest)[RPC]!;
  if (!('body' in st)) st.body = parseBody(req);
  return st.body;
}

/**
 * Mounts one webrpc service at `${routePrefix}:method`: POST only, JSON in and out,
 * errors in the webrpc wire shape with the service's own codes. Access and the response cache are
 * the shared pipeline's hooks; the body is parsed after the caller is admitted (as Sequence's
 * servers do: their auth middleware runs before the handler decodes), and not at all for an answer
 * from the cache, since only a body the parser accepted can have been stored.
 */
export async function registerWebrpcService(app: FastifyInstance, routePrefix: string, service: ServiceDef, deps: WebrpcDeps) {
  await app.register(async (scope) => {
    // Parse bodies ourselves: the webrpc rules on content type and empty bodies differ from fastify's.
    scope.removeAllContentTypeParsers();
    scope.addContentTypeParser('*', { parseAs: 'buffer' }, (_req, body, done) => done(null, body));

    const url = `${routePrefix}:method`;
    const headerValue = `${WEBRPC_VERSION};${service.schema}`;
    const E = service.errors;
    const accessErrors = {
      unauthorized: E.unauthorized,
      permissionDenied: E.permissionDenied,
      networkNotAllowed: E.networkNotAllowed,
      rateLimited: E.rateLimited,
      invalidOrigin: E.invalidOrigin,
      secretKeyCors: E.secretKeyCors,
    };
    const sendReused: AccessRequest['sendReused'] = (_req, reply, answer) => sendJsonBytes(reply, answer.body);
    const refuse = (reply: FastifyReply, err: RpcError) => {
      const st = (reply.request as RpcRequest)[RPC];
      if (st) st.code = err.def.code;
      return sendError(reply, err.def, err.detail, err.headers);
    };

    const describe = (req: FastifyRequest): AccessRequest => {
      const params = req.params as Record<string, string>;
      const name = params.method;
      const def = Object.hasOwn(service.methods, name) ? service.methods[name] : undefined;
      (req as RpcRequest)[RPC] = { name, def, started: process.hrtime.bigint(), code: 0 };
      if (!def) throw new RpcError(WebrpcErrors.WebrpcBadRoute, `no webrpc method defined for path ${req.url.split('?')[0]}`);
      const mode = def.auth ?? service.defaultAuth(name);
      const raw = req.body as Buffer | undefined;
      return {
        mode,
        errors: accessErrors,
        queryKey: false,
        networks: () => networksNamed(params, bodyOf(req)),
        // A call in response-cache keys (reuse.ts): the method and the body as sent (the pipeline adds the caller).
        reuseKey: mayReuse(service, def, mode) && raw?.length && mediaType(req) === 'application/json' ? `${rpcReusePrefix(service.name, name)}${raw.toString('latin1')}` : undefined,
        sendReused,
      };
    };
    const { preHandler, onSend } = deps.access.hooks(describe, refuse);

    scope.addHook('onRequest', (_req, reply, done) => {
      reply.header('Webrpc', headerValue);
      done();
    });
    // Counts are plain numbers per (method, code), added to the counter when it is read; the
    // histogram's child per method is kept. An unknown method name is counted as 'unknown'.
    const counted = new Tally(deps.metrics.rpcRequests);
    const rpcLabels = (method: string, code: number) => ({ service: service.name, method, code: String(code) });
    const timers = new Map<string, { observe(v: number): void }>();
    scope.addHook('onResponse', (req, _reply, done) => {
      done();
      const st = (req as RpcRequest)[RPC];
      if (!st) return;
      observe(st.def ? st.name : 'unknown', st.code, Number(process.hrtime.bigint() - st.started) / 1e9);
    });

    const observe = (label: string, code: number, seconds: number) => {
      counted.add(`${label} ${code}`, rpcLabels, label, code);
      let t = timers.get(label);
      if (!t) timers.set(label, (t = deps.metrics.rpcDuration.labels(service.name, label)));
      t.observe(seconds);
    };
    // Calls of reusable methods may be answered before routing, from the same cache and by the same
    // policy; what is not answered there reaches this router with its body already read.
    if (deps.early && !routePrefix.includes(':')) {
      const headers = Object.freeze({ webrpc: headerValue });
      // Described once per method, not per call.
      const reusable = new Map<string, EarlyRpcMethod>();
      for (const [name, def] of Object.entries(service.methods)) {
        const mode = def.auth ?? service.defaultAuth(name);
        if (mayReuse(service, def, mode)) reusable.set(name, { mode, reusePrefix: rpcReusePrefix(service.name, name), headers, route: url, answered: (seconds) => observe(name, 0, seconds) });
      }
      if (reusable.size) {
        deps.early.addRpc(routePrefix, reusable);
        scope.addHook('preParsing', deps.early.replayBody);
      }
    }

    scope.route({
      method: ['GET', 'PUT', 'DELETE', 'PATCH'],
      url,
      handler: (_req, reply) => {
        reply.header('Allow', 'POST');
        return sendError(reply, WebrpcErrors.WebrpcBadMethod, 'only POST is allowed');
      },
    });

    scope.post(url, { preHandler, onSend }, async (req, reply) => {
      const st = (req as RpcRequest)[RPC]!;
      const def = st.def!;
      try {
        const body = bodyOf(req);
        const caller = callerOf(req);
        const ctx: RpcContext = { project: caller.project, keyId: caller.keyId, admin: caller.admin === true, params: req.params as Record<string, string>, request: req, reply };
        await service.prepare?.(ctx);
        const parsed = def.input.safeParse(body);
        if (!parsed.success) {
          const { missing, text } = describeIssues(parsed.error, body);
          throw new RpcError(missing ? E.requiredArgument : E.invalidArgument, text);
        }
        const out = await def.handler(parsed.data, ctx);
        if (out === STREAMED) return reply;
        if (out instanceof ReusableJson) {
          keep(reply, { until: out.until, isCurrent: out.isCurrent, tokens: out.tokens });
          return sendJsonBytes(reply, Buffer.from(out.text, 'utf8'));
        }
        return reply
          .code(200)
          .type('application/json')
          .send(out instanceof RawJson ? out.text : JSON.stringify(out ?? {}));
      } catch (err) {
        if (err instanceof RpcError) return refuse(reply, err);
        const outage = deps.outage?.(err);
        // Logged once per outage by the chain's health, not here per request.
        if (outage) return refuse(reply, unavailableError(E.chainUnavailable, outage));
        const dbDown = databaseUnavailable(E.databaseUnavailable, err);
        if (dbDown) return refuse(reply, dbDown);
        st.code = WebrpcErrors.WebrpcInternalError.code;
        req.log.error({ err, method: st.name }, 'unhandled error in rpc method');
        return sendError(reply, WebrpcErrors.WebrpcInternalError, `internal error (request ${req.id})`);
      }
    });
  });
}

function unavailableError(def: ErrorDef, o: ChainOutage): RpcError {
  const what = o.rateLimited ? 'is rate-limiting us' : 'cannot be reached';
  return new RpcError(def, `chain ${o.chain} (${o.chainId}): its node ${what} (${o.cause}); retry in ${o.retryAfterS} s`, { 'Retry-After': String(o.retryAfterS) });
}

export function sendJsonBytes(reply: FastifyReply, body: Buffer) {
  return reply.code(200).header('content-type', JSON_UTF8).send(body);
}
