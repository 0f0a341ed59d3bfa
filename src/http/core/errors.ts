import { MetarelayError } from '../../util/error.ts';

/**
 * The one catalog of client-visible errors. Codes and HTTP statuses follow the Sequence webrpc
 * schemas; the metadata and relayer services number their errors differently, so each has its own table.
 */
export interface ErrorDef {
  readonly name: string;
  readonly code: number;
  readonly status: number;
  readonly message: string;
}

const table = <K extends string>(rows: Record<K, [number, number, string]>) =>
  Object.fromEntries(Object.entries<[number, number, string]>(rows).map(([name, [code, status, message]]) => [name, Object.freeze({ name, code, status, message })])) as Record<K, ErrorDef>;

export const WebrpcErrors = table({
  WebrpcEndpoint: [0, 400, 'endpoint error'],
  WebrpcRequestFailed: [-1, 400, 'request failed'],
  WebrpcBadRoute: [-2, 404, 'bad route'],
  WebrpcBadMethod: [-3, 405, 'bad method'],
  WebrpcBadRequest: [-4, 400, 'bad request'],
  WebrpcBadResponse: [-5, 500, 'bad response'],
  WebrpcServerPanic: [-6, 500, 'server panic'],
  WebrpcInternalError: [-7, 500, 'internal error'],
  WebrpcClientAborted: [-8, 400, 'request aborted by client'],
  WebrpcStreamLost: [-9, 400, 'stream lost'],
  WebrpcStreamFinished: [-10, 200, 'stream finished'],
});

export const MetadataErrors = table({
  Unauthorized: [1000, 401, 'Unauthorized access'],
  PermissionDenied: [1001, 403, 'Permission denied'],
  SessionExpired: [1002, 403, 'Session expired'],
  MethodNotFound: [1003, 404, 'Method not found'],
  RequestConflict: [1004, 409, 'Conflict with target resource'],
  Fail: [1005, 400, 'Request Failed'],
  Geoblocked: [1006, 451, 'Geoblocked region'],
  TaskFailed: [1007, 400, 'Task failed'],
  Deprecated: [1008, 400, 'RPC method is deprecated'],
  Timeout: [2000, 408, 'Request timed out'],
  InvalidArgument: [2001, 400, 'Invalid argument'],
  RequiredArgument: [2002, 400, 'Required argument missing'],
  QueryFailed: [2003, 400, 'Query failed'],
  ValidationFailed: [2004, 400, 'Validation failed'],
  RateLimited: [2005, 429, 'Rate limited'],
  NotFound: [3000, 400, 'Resource not found'],
  ProjectNotFound: [3002, 400, 'Project not found'],
  ChainNotFound: [3003, 400, 'Chain not found'],
  TokenDirectoryDisabled: [4001, 400, 'Token Directory is disabled'],
});

/**
 * Key refusals of the shared authcontrol set that the service tables lack (kept out of them: those are
 * the clients' tables, code for code). `SecretKeyCorsDisallowed` is authcontrol v0.9.1's refusal of a
 * secret key sent from a browser; `InvalidOrigin` is the relayer's and indexer's 1103, which the
 * metadata schema does not list; `QuotaExceeded` their 1200, for the metadata service's quotas.
 */
export const AuthControlErrors = table({
  SecretKeyCorsDisallowed: [1009, 403, "CORS disallowed. Admin API Secret Key can't be used from a web app."],
  InvalidOrigin: [1103, 403, 'Invalid origin for Access Key'],
  // A project's quota is full (collections, tokens, assets, links, bytes): the relayer's and indexer's code for it.
  QuotaExceeded: [1200, 429, 'Quota exceeded'],
});

export const RelayerErrors = table({
  Unauthorized: [1000, 401, 'Unauthorized access'],
  PermissionDenied: [1001, 403, 'Permission denied'],
  SessionExpired: [1002, 403, 'Session expired'],
  MethodNotFound: [1003, 404, 'Method not found'],
  RequestConflict: [1004, 409, 'Conflict with target resource'],
  Aborted: [1005, 400, 'Request aborted'],
  Geoblocked: [1006, 451, 'Geoblocked region'],
  RateLimited: [1007, 429, 'Rate-limited. Please slow down.'],
  ProjectNotFound: [1008, 401, 'Project not found'],
  AccessKeyNotFound: [1101, 401, 'Access key not found'],
  AccessKeyMismatch: [1102, 403, 'Access key mismatch'],
  InvalidOrigin: [1103, 403, 'Invalid origin for Access Key'],
  InvalidService: [1104, 403, 'Service not enabled for Access key'],
  UnauthorizedUser: [1105, 403, 'Unauthorized user'],
  InvalidChain: [1106, 403, 'Network not enabled for Access key'],
  QuotaExceeded: [1200, 429, 'Quota request exceeded'],
  QuotaRateLimit: [1201, 429, 'Quota rate limit exceeded'],
  NoDefaultKey: [1300, 403, 'No default access key found'],
  MaxAccessKeys: [1301, 403, 'Access keys limit reached'],
  AtLeastOneKey: [1302, 403, 'You need at least one Access Key'],
  Timeout: [1900, 408, 'Request timed out'],
  InvalidArgument: [2001, 400, 'Invalid argument'],
  Unavailable: [2002, 400, 'Unavailable resource'],
  QueryFailed: [2003, 400, 'Query failed'],
  // Sequence's schema answers 400; a missing meta-transaction or sponsor is no malformed request, and
  // clients (and balancers' error rates) read the status: 404. The code, which clients match on, is kept.
  NotFound: [3000, 404, 'Resource not found'],
  InsufficientFee: [3004, 402, 'Insufficient fee'],
  NotEnoughBalance: [3005, 402, 'Not enough balance'],
  SimulationFailed: [3006, 400, 'Simulation failed'],
});

/** The Sequence Indexer's table (@0xsequence/indexer indexer.gen.ts). */
export const IndexerErrors = table({
  Unauthorized: [1000, 401, 'Unauthorized access'],
  PermissionDenied: [1001, 403, 'Permission denied'],
  SessionExpired: [1002, 403, 'Session expired'],
  MethodNotFound: [1003, 404, 'Method not found'],
  RequestConflict: [1004, 409, 'Conflict with target resource'],
  Aborted: [1005, 400, 'Request aborted'],
  Geoblocked: [1006, 451, 'Geoblocked region'],
  RateLimited: [1007, 429, 'Rate-limited. Please slow down.'],
  ProjectNotFound: [1100, 401, 'Project not found'],
  AccessKeyNotFound: [1101, 401, 'Access key not found'],
  AccessKeyMismatch: [1102, 409, 'Access key mismatch'],
  InvalidOrigin: [1103, 403, 'Invalid origin for Access Key'],
  InvalidService: [1104, 403, 'Service not enabled for Access key'],
  UnauthorizedUser: [1105, 403, 'Unauthorized user'],
  QuotaExceeded: [1200, 429, 'Quota exceeded'],
  RateLimit: [1201, 429, 'Rate limit exceeded'],
  NoDefaultKey: [1300, 403, 'No default access key found'],
  MaxAccessKeys: [1301, 403, 'Access keys limit reached'],
  AtLeastOneKey: [1302, 403, 'You need at least one Access Key'],
  Timeout: [1900, 408, 'Request timed out'],
  InvalidArgument: [2001, 400, 'Invalid argument'],
  Unavailable: [2002, 400, 'Unavailable resource'],
  QueryFailed: [2003, 400, 'Query failed'],
  ResourceExhausted: [2004, 400, 'Resource exhausted'],
  NotFound: [3000, 400, 'Resource not found'],
  MetadataCallFailed: [3003, 400, 'Metadata service call failed'],
});

/** The errors every service must be able to raise generically, mapped to its own table. */
export interface ServiceErrorMap {
  unauthorized: ErrorDef;
  permissionDenied: ErrorDef;
  invalidArgument: ErrorDef;
  requiredArgument: ErrorDef;
  chainNotFound: ErrorDef;
  notFound: ErrorDef;
  rateLimited: ErrorDef;
  timeout: ErrorDef;
  /** A network the caller's project is not enabled for. */
  networkNotAllowed: ErrorDef;
  /** A publishable key sent from an origin it does not allow. */
  invalidOrigin: ErrorDef;
  /** A secret key sent from a browser (an Origin header). */
  secretKeyCors: ErrorDef;
  /** The chain's node cannot be reached (or rate-limits us): transient, HTTP 503 with Retry-After. */
  chainUnavailable: ErrorDef;
  /** The database cannot serve now (restarting, unreachable, out of connections): HTTP 503 with Retry-After. */
  databaseUnavailable: ErrorDef;
}

// The Sequence tables have no "retry later" status: their closest code, answered as 503 so clients
// and balancers see a transient failure rather than a client mistake.
const unavailable = (def: ErrorDef, message: string): ErrorDef => Object.freeze({ ...def, status: 503, message });

export const metadataErrorMap: ServiceErrorMap = {
  unauthorized: MetadataErrors.Unauthorized,
  permissionDenied: MetadataErrors.PermissionDenied,
  invalidArgument: MetadataErrors.InvalidArgument,
  requiredArgument: MetadataErrors.RequiredArgument,
  chainNotFound: MetadataErrors.ChainNotFound,
  notFound: MetadataErrors.NotFound,
  rateLimited: MetadataErrors.RateLimited,
  timeout: MetadataErrors.Timeout,
  networkNotAllowed: MetadataErrors.PermissionDenied,
  invalidOrigin: AuthControlErrors.InvalidOrigin,
  secretKeyCors: AuthControlErrors.SecretKeyCorsDisallowed,
  chainUnavailable: unavailable(MetadataErrors.Fail, 'Chain node unavailable'),
  databaseUnavailable: unavailable(MetadataErrors.Fail, 'Database unavailable'),
};

export const relayerErrorMap: ServiceErrorMap = {
  unauthorized: RelayerErrors.Unauthorized,
  permissionDenied: RelayerErrors.PermissionDenied,
  invalidArgument: RelayerErrors.InvalidArgument,
  // The relayer table has no RequiredArgument (its 2002 means Unavailable).
  requiredArgument: RelayerErrors.InvalidArgument,
  chainNotFound: RelayerErrors.InvalidChain,
  notFound: RelayerErrors.NotFound,
  rateLimited: RelayerErrors.RateLimited,
  timeout: RelayerErrors.Timeout,
  networkNotAllowed: RelayerErrors.InvalidChain,
  invalidOrigin: RelayerErrors.InvalidOrigin,
  secretKeyCors: AuthControlErrors.SecretKeyCorsDisallowed,
  chainUnavailable: unavailable(RelayerErrors.Unavailable, 'Chain node unavailable'),
  databaseUnavailable: unavailable(RelayerErrors.Unavailable, 'Database unavailable'),
};

export const indexerErrorMap: ServiceErrorMap = {
  unauthorized: IndexerErrors.Unauthorized,
  permissionDenied: IndexerErrors.PermissionDenied,
  invalidArgument: IndexerErrors.InvalidArgument,
  // The indexer table has no RequiredArgument (its 2002 means Unavailable).
  requiredArgument: IndexerErrors.InvalidArgument,
  // A network the service does not index: the path names a resource that is not there.
  chainNotFound: IndexerErrors.Unavailable,
  notFound: IndexerErrors.NotFound,
  rateLimited: IndexerErrors.RateLimited,
  timeout: IndexerErrors.Timeout,
  networkNotAllowed: IndexerErrors.InvalidService,
  invalidOrigin: IndexerErrors.InvalidOrigin,
  secretKeyCors: AuthControlErrors.SecretKeyCorsDisallowed,
  chainUnavailable: unavailable(IndexerErrors.Unavailable, 'Chain node unavailable'),
  databaseUnavailable: unavailable(IndexerErrors.Unavailable, 'Database unavailable'),
};

/** The access refusals of the metadata routes outside webrpc (REST, media, collection uploads). */
export const metadataAccessErrors = {
  unauthorized: MetadataErrors.Unauthorized,
  permissionDenied: MetadataErrors.PermissionDenied,
  networkNotAllowed: MetadataErrors.PermissionDenied,
  rateLimited: MetadataErrors.RateLimited,
  invalidOrigin: AuthControlErrors.InvalidOrigin,
  secretKeyCors: AuthControlErrors.SecretKeyCorsDisallowed,
} as const;

/** The service whose error table answers for a path (the wire codes differ per service). */
export function errorMapForPath(path: string): ServiceErrorMap {
  if (path.startsWith('/relayer/')) return relayerErrorMap;
  if (path.startsWith('/indexer/') || path.startsWith('/rpc/IndexerGateway/')) return indexerErrorMap;
  return metadataErrorMap;
}

/** A catalog error as raised: its kind is the catalog's name; a timeout, a rate limit or Unavailable may be asked again. */
export class RpcError extends MetarelayError {
  override readonly name = 'RpcError';
  constructor(
    readonly def: ErrorDef,
    readonly detail?: string,
    readonly headers: Record<string, string> = {},
  ) {
    super(detail ? `${def.name}: ${detail}` : def.name, { kind: def.name, retryable: RETRYABLE_STATUS.has(def.status), docsPath: 'api.md#conventions-webrpc' });
  }
}

const RETRYABLE_STATUS = new Set([408, 429, 503]);

export interface WireError {
  error: string;
  code: number;
  msg: string;
  message: string;
  cause: string;
  status: number;
}

/**
 * Both `msg` (old clients, Go) and `message` (new TS runtimes) carry the message, with the reason: the
 * official clients make `err.message` of `message` alone, so "Insufficient fee" was all a client that
 * prints it showed of a spent sponsorship budget. `cause` keeps the reason alone.
 */
export function toWire(def: ErrorDef, cause?: string): WireError {
  const message = cause && cause !== def.message ? `${def.message}: ${cause}` : def.message;
  return { error: def.name, code: def.code, msg: message, message, cause: cause ?? def.message, status: def.status };
}
