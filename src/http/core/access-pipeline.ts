import { createHash } from 'node:crypto';
import type { FastifyReply, FastifyRequest, onSendHookHandler, preHandlerHookHandler } from 'fastify';
import type { Authenticator, AuthOutcome } from '../../access/authenticator.ts';
import type { RateLimiter } from '../../access/rate-limiter.ts';
import { refusedNetwork } from '../../access/allowed-networks.ts';
import { familyOf } from '../../access/usage-family.ts';
import { keyRefusal, type KeyRefusal } from '../../access/key-kinds.ts';
import type { ResponseCache, ReusableAnswer } from '../../access/response-cache.ts';
import type { NetworkRegistry } from '../../chain/registry.ts';
import type { Project } from '../../store/projects.ts';
import type { Metrics } from '../../telemetry/metrics.ts';
import { Tally } from '../../telemetry/tally.ts';
import { readAccessKey, readBearer } from './auth.ts';
import { RpcError, type ErrorDef } from './errors.ts';

/**
 * `admin`: an operator token (Authorization: Bearer); a project access key never passes.
 * `secret`: what writes project state. A project's secret key (X-Access-Key, or as the Bearer token,
 * which is where Sequence's Collections client puts its credential), or an operator token acting for
 * any project; a publishable key is refused (access/key-kinds.ts).
 */
export type AuthMode = 'none' | 'optional' | 'required' | 'admin' | 'secret';

/** The refusals of the access check, in the words of the service asking. */
export interface AccessErrors {
  unauthorized: ErrorDef;
  permissionDenied: ErrorDef;
  networkNotAllowed: ErrorDef;
  rateLimited: ErrorDef;
  /** A publishable key from an origin it does not allow. */
  invalidOrigin: ErrorDef;
  /** A secret key sent from a browser. */
  secretKeyCors: ErrorDef;
}

/** What a route says about one request, for the access check and the response cache. */
export interface AccessRequest {
  mode: AuthMode;
  errors: AccessErrors;
  /** REST and media take the key in `?accessKey=` too; RPC only in the header. */
  queryKey: boolean;
  /** The networks the request names. Called only for a project held to some networks. */
  networks: () => string[];
  /**
   * The request as part of a response-cache key (the caller is added by the pipeline), when its
   * answer may be given again: an idempotent read whose answer depends on nothing else.
   */
  reuseKey?: string;
  /** Sends an answer from the cache (REST adds its validators and answers If-None-Match). */
  sendReused: (req: FastifyRequest, reply: FastifyReply, answer: ReusableAnswer) => FastifyReply;
}

/** Who is calling, once admitted. */
export interface Caller {
  project: Project | null;
  keyId: number | null;
  /** Whom the answer is for, in response-cache keys: `k<key id>`, `anon` (no key), `-` (a public route). */
  principal: string;
  /** Admitted with an operator token (mode `admin` or `project`). */
  admin?: boolean;
  /** Admitted with a secret key: a backend's, whose one address serves every user of it (per-client shares do not split it). */
  secretKey?: boolean;
}

export interface AccessDeps {
  auth: Authenticator;
  /** Admin bearer tokens: the config's, and those `metarelay admin create` stored (hashed). */
  admin: { verify(token: string | undefined): boolean | Promise<boolean> };
  rateLimiter: RateLimiter;
  networks: NetworkRegistry;
  responses: ResponseCache;
  metrics: Metrics;
}

/** A reusable answer the handler hands to `keep`: what the cache needs besides the bytes. */
export interface Reusable {
  until: number;
  isCurrent: () => boolean;
  tokens: number;
  /** REST sends validators with it. */
  etag?: string;
}

const REUSED_LABELS = () => ({ result: 'response' });

const PUBLIC: Caller = Object.freeze({ project: null, keyId: null, principal: '-' });
const ANONYMOUS: Caller = Object.freeze({ project: null, keyId: null, principal: 'anon' });
const OPERATOR: Caller = Object.freeze({ project: null, keyId: null, principal: 'admin', admin: true });

// Per-request state, on symbols so nothing else on the request can collide with it.
const CALLER = Symbol('metarelay.caller');
const REUSE_KEY = Symbol('metarelay.reuseKey');
const REUSABLE = Symbol('metarelay.reusable');
/** The project and key a valid key named, set before the checks that may still refuse it (the request log counts refusals too). */
const KEYED = Symbol('metarelay.keyed');
/** The project and key a valid access key named (the project's request log notes them). */
export type Keyed = { projectId: number; keyId: number };

type Tagged = FastifyRequest & { [CALLER]?: Caller; [REUSE_KEY]?: string; [REUSABLE]?: Reusable; [KEYED]?: Keyed };

export function etagOf(body: string | Buffer): string {
  return `W/"${createHash('sha1').update(body).digest('base64url')}"`;
}

/**
 * The one policy that decides who may call what and what may be answered from the response cache
 * (which answers may be, to whom and under which key: reuse.ts),
 * for REST and webrpc alike, run as fastify hooks on the routes that use it:
 *
 *   preHandler: key → authenticate → allowed networks → rate limit, then a cache hit answers early;
 *   onSend:     a reusable answer is stored, keyed by the caller and the request.
 *
 * The cache is looked up only after every check passed for this request, and keyed by the caller
 * (key id, "anon" or "-" for public routes), so an answer is never given to a caller who may not
 * see it. A cached answer is still a request: it spends from the key's bucket like any other.
 */
export class AccessPipeline {
  /** Tokens answered from the response cache, added to the lookup counter when it is read (a count per hit, not a labelled inc). */
  private readonly reused: Tally<'result'>;

  constructor(private readonly deps: AccessDeps) {
    this.reused = new Tally(deps.metrics.metadataCache);
  }

  private countReused(tokens: number) {
    if (tokens) this.reused.add('response', REUSED_LABELS, undefined, undefined, tokens);
  }

  /**
   * key → authenticate → allowed networks → rate limit; throws RpcError in the route's words.
   * Synchronous when nothing needs a query (a cached key with no bucket to take from the database),
   * which is the hot path: no promise per request.
   */
  admit(req: FastifyRequest, a: AccessRequest): Caller | Promise<Caller> {
    if (a.mode === 'admin') return this.admitAdmin(req, a.errors);
    if (a.mode === 'secret') return this.admitSecret(req, a);
    if (a.mode === 'none') return PUBLIC;
    const key = readAccessKey(req, a.queryKey);
    const family = familyOf(req.url);
    const origin = originOf(req);
    const known = this.deps.auth.authenticateCached(key, family);
    return known ? this.admitKey(known, a, origin, req) : this.deps.auth.authenticate(key, family).then((outcome) => this.admitKey(outcome, a, origin, req));
  }

  private admitKey(outcome: AuthOutcome, a: AccessRequest, origin: string | undefined, req: FastifyRequest): Caller | Promise<Caller> {
    const E = a.errors;
    if (outcome.kind === 'ok') (req as Tagged)[KEYED] = { projectId: outcome.project.id, keyId: outcome.keyId };
    if (outcome.kind === 'invalid') throw new RpcError(E.unauthorized, 'invalid access key');
    if (outcome.kind === 'none') {
      if (a.mode === 'required') {
        throw new RpcError(E.unauthorized, a.queryKey ? 'access key required: X-Access-Key header or ?accessKey=' : 'access key required: send it in the X-Access-Key header');
      }
      return ANONYMOUS;
    }
    const refusal = keyRefusal(outcome, a.mode === 'secret', origin);
    if (refusal) throw refusalError(refusal, E);
    if (outcome.project.allowedChainIds) {
      const refused = refusedNetwork(outcome.project, this.deps.networks, a.networks());
      if (refused) throw new RpcError(E.networkNotAllowed, `network ${refused.name} (chain ${refused.chainId}) is not enabled for project ${outcome.project.name}`);
    }
    const caller: Caller = { project: outcome.project, keyId: outcome.keyId, principal: `k${outcome.keyId}`, secretKey: outcome.keyKind === 'secret' };
    const waiting = this.deps.rateLimiter.admit(outcome);
    if (!waiting) return caller;
    return waiting.then((refusal) => {
      if (!refusal) return caller;
      throw new RpcError(E.rateLimited, `access key over its rate limit of ${refusal.ratePerSec}/s (burst ${refusal.burst}); retry in ${refusal.retryAfterSec}s`, {
        'Retry-After': String(refusal.retryAfterSec),
      });
    });
  }

  /**
   * Who is calling, when that can be decided now with nothing to refuse (the key known in memory, or
   * no key where none is needed): the key's outcome and its principal; undefined otherwise. Counts
   * nothing. The first half of `reuseNow`, and what `mayReuse` asks.
   */
  private callerNow(mode: AuthMode, key: string | undefined): { outcome?: AuthOutcome; principal: string } | undefined {
    if (!this.deps.responses.enabled || mode === 'admin' || mode === 'secret') return undefined;
    if (mode === 'none') return { principal: PUBLIC.principal };
    const outcome = this.deps.auth.peek(key);
    if (!outcome || outcome.kind === 'invalid' || (outcome.kind === 'none' && mode === 'required')) return undefined;
    return { outcome, principal: outcome.kind === 'ok' ? `k${outcome.keyId}` : ANONYMOUS.principal };
  }

  /**
   * Whether a request of this caller could be answered from the cache now (the key known in memory,
   * nothing to refuse): whether its body is worth reading before routing.
   */
  mayReuse(mode: AuthMode, key: string | undefined): boolean {
    return this.callerNow(mode, key) !== undefined;
  }

  /** Longer response-cache keys are never stored (ResponseCache.maxKeyLength). */
  get maxReuseKeyLength(): number {
    return this.deps.responses.maxKeyLength;
  }

  /**
   * The same policy for a request looked at before it is routed (http/core/early-answers.ts): key →
   * authenticate → allowed networks, the cached answer, then the rate limit, each only where it can
   * be decided now. Nothing is counted or spent unless the answer is returned; on undefined (a key
   * not in memory, a refusal to write, a miss, a bucket only the database can answer) the request
   * goes on to its route, whose hooks decide it as for any other. With the answer, the project and key
   * that asked (null: no key), for the project's request log.
   */
  reuseNow(mode: AuthMode, key: string | undefined, origin: string | undefined, networks: () => string[], reuseKey: string, url?: string): { hit: ReusableAnswer; keyed: Keyed | null } | undefined {
    const { auth, responses, rateLimiter } = this.deps;
    if (reuseKey.length >= responses.maxKeyLength) return undefined;
    const caller = this.callerNow(mode, key);
    if (!caller) return undefined;
    const { outcome, principal } = caller;
    if (outcome?.kind === 'ok' && keyRefusal(outcome, false, origin)) return undefined;
    if (outcome?.kind === 'ok' && outcome.project.allowedChainIds && refusedNetwork(outcome.project, this.deps.networks, networks())) return undefined;
    const hit = responses.peek(`${principal}\n${reuseKey}`, Date.now());
    if (!hit || (outcome && !rateLimiter.spendNow(outcome))) return undefined;
    if (outcome?.kind === 'ok') auth.counted(outcome, familyOf(url));
    responses.hit();
    this.countReused(hit.tokens);
    return { hit, keyed: outcome?.kind === 'ok' ? { projectId: outcome.project.id, keyId: outcome.keyId } : null };
  }

  /**
   * The secret key is the Bearer token where there is one (Sequence's clients send their secret
   * credential there, `jwtAuth`, and may send the app's publishable key beside it in X-Access-Key,
   * which must then be a live key of the same project), else X-Access-Key.
   */
  private async admitSecret(req: FastifyRequest, a: AccessRequest): Promise<Caller> {
    const E = a.errors;
    const bearer = readBearer(req);
    if (bearer && (await this.deps.admin.verify(bearer))) return OPERATOR;
    const header = readAccessKey(req, false);
    const key = bearer ?? header;
    if (!key) throw new RpcError(E.unauthorized, 'a project secret key (Authorization: Bearer <key>, or X-Access-Key) or an admin token is required');
    const outcome = await this.deps.auth.authenticate(key);
    if (outcome.kind !== 'ok') throw new RpcError(E.unauthorized, bearer ? 'invalid admin token or access key' : 'invalid access key');
    if (bearer && header && header !== bearer) {
      const beside = await this.deps.auth.authenticate(header);
      if (beside.kind !== 'ok') throw new RpcError(E.unauthorized, 'invalid access key in X-Access-Key');
      if (beside.project.id !== outcome.project.id) throw new RpcError(E.permissionDenied, 'the X-Access-Key and the Bearer key belong to different projects');
    }
    return this.admitKey(outcome, a, originOf(req), req);
  }

  /** Whether the request carries an operator token (Authorization: Bearer): what sees operational detail (/ready's body, /metrics). */
  async isOperator(req: FastifyRequest): Promise<boolean> {
    const bearer = readBearer(req);
    return bearer !== undefined && (await this.deps.admin.verify(bearer));
  }

  private async admitAdmin(req: FastifyRequest, E: AccessErrors): Promise<Caller> {
    const bearer = readBearer(req);
    // The operator, not a public caller: services give it its own limits (relayer.ts), not an address's.
    if (await this.deps.admin.verify(bearer)) return OPERATOR;
    if (bearer) throw new RpcError(E.unauthorized, 'invalid admin token');
    if (readAccessKey(req, false)) throw new RpcError(E.permissionDenied, 'a project access key cannot call the admin API');
    throw new RpcError(E.unauthorized, 'admin token required: Authorization: Bearer <token>');
  }

  /**
   * The route hooks: `describe` says what the request is (it may throw RpcError, e.g. an unknown
   * method), `refuse` sends a refusal in the route's wire shape; the handler then finds its caller
   * with `callerOf(req)`.
   */
  hooks(describe: (req: FastifyRequest) => AccessRequest, refuse: (reply: FastifyReply, err: RpcError) => FastifyReply): { preHandler: preHandlerHookHandler; onSend: onSendHookHandler } {
    const { responses } = this.deps;
    const cacheOn = responses.enabled;
    /** After the caller is admitted: a cache hit answers now (true), a miss notes the key for onSend. */
    const lookup = (req: FastifyRequest, reply: FastifyReply, a: AccessRequest, caller: Caller): boolean => {
      (req as Tagged)[CALLER] = caller;
      if (!cacheOn || a.reuseKey === undefined || a.mode === 'admin' || a.reuseKey.length >= responses.maxKeyLength) return false;
      const key = `${caller.principal}\n${a.reuseKey}`;
      const hit = responses.get(key, Date.now());
      if (!hit) {
        (req as Tagged)[REUSE_KEY] = key;
        return false;
      }
      this.countReused(hit.tokens);
      a.sendReused(req, reply, hit);
      return true;
    };
    const failed = (reply: FastifyReply, err: unknown, done: (err?: Error) => void) => {
      if (!(err instanceof RpcError)) return done(err as Error);
      refuse(reply, err);
    };
    // A callback hook, synchronous on the hot path; after reply.send the route's handler does not run.
    const preHandler: preHandlerHookHandler = (req, reply, done) => {
      let a: AccessRequest;
      let admitted: Caller | Promise<Caller>;
      try {
        a = describe(req);
        admitted = this.admit(req, a);
      } catch (err) {
        return failed(reply, err, done);
      }
      if (!(admitted instanceof Promise)) {
        if (!lookup(req, reply, a, admitted)) done();
        return;
      }
      admitted.then(
        (caller) => {
          if (!lookup(req, reply, a, caller)) done();
        },
        (err) => failed(reply, err, done),
      );
    };
    const onSend: onSendHookHandler = (req, reply, payload, done) => {
      const key = (req as Tagged)[REUSE_KEY];
      const answer = (reply as unknown as Tagged)[REUSABLE];
      if (key !== undefined && answer && reply.statusCode === 200 && Buffer.isBuffer(payload)) {
        responses.set(key, { body: payload, until: answer.until, isCurrent: answer.isCurrent, tokens: answer.tokens, etag: answer.etag }, Date.now());
      }
      done(null, payload);
    };
    return { preHandler, onSend };
  }
}

/** A key-kind refusal in the words of the route refusing it. */
export function refusalError(r: KeyRefusal, E: AccessErrors): RpcError {
  return new RpcError(r.reason === 'origin' ? E.invalidOrigin : r.reason === 'secretFromBrowser' ? E.secretKeyCors : E.permissionDenied, r.detail);
}

/** The request's Origin header: a browser's request carries one, a backend's does not. */
function originOf(req: FastifyRequest): string | undefined {
  const o = req.headers.origin;
  return Array.isArray(o) ? o[0] : o;
}

/** The project and key a valid access key named on this request, admitted or refused after (null: none). */
export function keyedOf(req: FastifyRequest): Keyed | null {
  return (req as Tagged)[KEYED] ?? null;
}

/** The caller the pipeline admitted for this request. */
export function callerOf(req: FastifyRequest): Caller {
  return (req as Tagged)[CALLER] ?? PUBLIC;
}

/** Marks the answer about to be sent as reusable: the onSend hook stores it for the same caller and request. */
export function keep(reply: FastifyReply, answer: Reusable): void {
  (reply as unknown as Tagged)[REUSABLE] = answer;
}
