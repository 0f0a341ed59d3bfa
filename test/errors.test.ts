import Fastify from 'fastify';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { z } from 'zod';
import { Authenticator } from '../src/access/authenticator.ts';
import { RateLimiter } from '../src/access/rate-limiter.ts';
import { ResponseCache } from '../src/access/response-cache.ts';
import { NetworkRegistry } from '../src/chain/registry.ts';
import { AccessPipeline } from '../src/http/core/access-pipeline.ts';
import { adminTokenStore } from '../src/access/admin-tokens.ts';
import { MetadataErrors, RelayerErrors, RpcError, WebrpcErrors, metadataErrorMap, relayerErrorMap, type ErrorDef } from '../src/http/core/errors.ts';
import { method, registerWebrpcService } from '../src/http/core/webrpc.ts';
import { createLogger } from '../src/telemetry/logger.ts';
import { createMetrics } from '../src/telemetry/metrics.ts';
import pg from 'pg';
import { prepared } from '../src/store/db.ts';
import { databaseOutageOf, isConnectionLoss } from '../src/store/outage.ts';
import { isReadOnly } from '../src/store/pg-client.ts';
import { freePort } from './support/ports.ts';

// The documented tables (reference §1.6, §2.6, §3.5): name, code, HTTP status.
const WEBRPC: [string, number, number][] = [
  ['WebrpcEndpoint', 0, 400],
  ['WebrpcRequestFailed', -1, 400],
  ['WebrpcBadRoute', -2, 404],
  ['WebrpcBadMethod', -3, 405],
  ['WebrpcBadRequest', -4, 400],
  ['WebrpcBadResponse', -5, 500],
  ['WebrpcServerPanic', -6, 500],
  ['WebrpcInternalError', -7, 500],
  ['WebrpcClientAborted', -8, 400],
  ['WebrpcStreamLost', -9, 400],
  ['WebrpcStreamFinished', -10, 200],
];
const METADATA: [string, number, number][] = [
  ['Unauthorized', 1000, 401],
  ['PermissionDenied', 1001, 403],
  ['SessionExpired', 1002, 403],
  ['MethodNotFound', 1003, 404],
  ['RequestConflict', 1004, 409],
  ['Fail', 1005, 400],
  ['Geoblocked', 1006, 451],
  ['TaskFailed', 1007, 400],
  ['Deprecated', 1008, 400],
  ['Timeout', 2000, 408],
  ['InvalidArgument', 2001, 400],
  ['RequiredArgument', 2002, 400],
  ['QueryFailed', 2003, 400],
  ['ValidationFailed', 2004, 400],
  ['RateLimited', 2005, 429],
  ['NotFound', 3000, 400],
  ['ProjectNotFound', 3002, 400],
  ['ChainNotFound', 3003, 400],
  ['TokenDirectoryDisabled', 4001, 400],
];
const RELAYER: [string, number, number][] = [
  ['Unauthorized', 1000, 401],
  ['PermissionDenied', 1001, 403],
  ['SessionExpired', 1002, 403],
  ['MethodNotFound', 1003, 404],
  ['RequestConflict', 1004, 409],
  ['Aborted', 1005, 400],
  ['Geoblocked', 1006, 451],
  ['RateLimited', 1007, 429],
  ['ProjectNotFound', 1008, 401],
  ['AccessKeyNotFound', 1101, 401],
  ['AccessKeyMismatch', 1102, 403],
  ['InvalidOrigin', 1103, 403],
  ['InvalidService', 1104, 403],
  ['UnauthorizedUser', 1105, 403],
  ['InvalidChain', 1106, 403],
  ['QuotaExceeded', 1200, 429],
  ['QuotaRateLimit', 1201, 429],
  ['NoDefaultKey', 1300, 403],
  ['MaxAccessKeys', 1301, 403],
  ['AtLeastOneKey', 1302, 403],
  ['Timeout', 1900, 408],
  ['InvalidArgument', 2001, 400],
  ['Unavailable', 2002, 400],
  ['QueryFailed', 2003, 400],
  ['NotFound', 3000, 404],
  ['InsufficientFee', 3004, 402],
  ['NotEnoughBalance', 3005, 402],
  ['SimulationFailed', 3006, 400],
];

const tables: [string, Record<string, ErrorDef>, [string, number, number][]][] = [
  ['webrpc', WebrpcErrors, WEBRPC],
  ['metadata', MetadataErrors, METADATA],
  ['relayer', RelayerErrors, RELAYER],
];

// A throwaway service on the real webrpc router that raises any catalog error by name.
const app = Fastify();
beforeAll(async () => {
  const metrics = createMetrics();
  const auth = new Authenticator({} as never, createLogger('silent'));
  for (const [name, catalog] of tables) {
    await registerWebrpcService(
      app,
      `/rpc/Raise_${name}/`,
      {
        name: `Raise_${name}`,
        schema: 'test@v0',
        errors: name === 'relayer' ? relayerErrorMap : metadataErrorMap,
        defaultAuth: () => 'none',
        methods: {
          Raise: method({
            input: z.object({ name: z.string() }),
            handler: async ({ name: n }) => {
              throw new RpcError(catalog[n], `raised ${n}`);
            },
          }),
        },
      },
      {
        access: new AccessPipeline({
          auth,
          admin: adminTokenStore({} as never, []),
          rateLimiter: new RateLimiter({} as never, {}),
          networks: new NetworkRegistry([]),
          responses: new ResponseCache(0, 0, 0),
          metrics,
        }),
        metrics,
      },
    );
  }
  await app.ready();
});
afterAll(() => app.close());

describe('error catalog', () => {
  for (const [name, catalog, documented] of tables) {
    it(`${name}: holds exactly the documented errors`, () => {
      expect(Object.values(catalog).map((d) => [d.name, d.code, d.status])).toEqual(documented);
    });

    it(`${name}: emits every error over HTTP with its code, status and both message keys`, async () => {
      for (const [errName, code, status] of documented) {
        const res = await app.inject({
          method: 'POST',
          url: `/rpc/Raise_${name}/Raise`,
          headers: { 'content-type': 'application/json' },
          payload: JSON.stringify({ name: errName }),
        });
        expect(res.statusCode, errName).toBe(status);
        expect(res.json()).toEqual({
          error: errName,
          code,
          // The reason is in the message too: official clients show only `message` as err.message.
          msg: `${catalog[errName].message}: raised ${errName}`,
          message: `${catalog[errName].message}: raised ${errName}`,
          cause: `raised ${errName}`,
          status,
        });
      }
    });
  }

  it('maps a missing argument to RequiredArgument (metadata) and a wrong type to InvalidArgument', async () => {
    const missing = await app.inject({ method: 'POST', url: '/rpc/Raise_metadata/Raise', headers: { 'content-type': 'application/json' }, payload: '{}' });
    expect(missing.json()).toMatchObject({ error: 'RequiredArgument', code: 2002, status: 400 });
    expect(missing.json().cause).toContain('name');
    const wrong = await app.inject({ method: 'POST', url: '/rpc/Raise_metadata/Raise', headers: { 'content-type': 'application/json' }, payload: '{"name":5}' });
    expect(wrong.json()).toMatchObject({ error: 'InvalidArgument', code: 2001, status: 400 });
    // The relayer's 2002 means Unavailable, so a missing argument there is InvalidArgument.
    const relayerMissing = await app.inject({ method: 'POST', url: '/rpc/Raise_relayer/Raise', headers: { 'content-type': 'application/json' }, payload: '{"name":null}' });
    expect(relayerMissing.json()).toMatchObject({ error: 'InvalidArgument', code: 2001 });
  });
});

describe('database faults: which are the database being unavailable, and which statements may be sent again', () => {
  it('classes refused and lost connections, a server starting or full, and a lock not granted as unavailable; other failures not', async () => {
    // A real refusal: nothing listens on a port just freed.
    const refused = await new pg.Client({ connectionString: `postgres://x@127.0.0.1:${await freePort()}/x` }).connect().then(
      () => undefined,
      (err: unknown) => err,
    );
    expect(databaseOutageOf(refused)).toMatch(/ECONNREFUSED/);
    expect(isConnectionLoss(refused)).toBe(true);
    // pg's DatabaseError carries the SQLSTATE in `code`, pg's own connection errors only a message.
    const pgError = (code: string, message: string) => Object.assign(new Error(message), { code });
    expect(databaseOutageOf(pgError('53300', 'sorry, too many clients already'))).toBe('too many connections');
    expect(databaseOutageOf(pgError('57P03', 'the database system is starting up'))).toMatch(/starting up/);
    expect(databaseOutageOf(pgError('57P01', 'terminating connection due to administrator command'))).toMatch(/ended by the server/);
    expect(databaseOutageOf(pgError('08006', 'connection failure'))).toMatch(/connection/);
    expect(databaseOutageOf(new Error('Connection terminated unexpectedly'))).toMatch(/lost/);
    expect(databaseOutageOf(new Error('wrapped', { cause: new Error('Connection terminated unexpectedly') }))).toMatch(/lost/);
    // A lock not granted in time is answered 503, but the session lives: its client is kept.
    expect(databaseOutageOf(pgError('55P03', 'canceling statement due to lock timeout'))).toMatch(/lock_timeout/);
    expect(isConnectionLoss(pgError('55P03', 'canceling statement due to lock timeout'))).toBe(false);
    // A bug stays a bug (500 with the request id).
    expect(databaseOutageOf(pgError('23505', 'duplicate key value violates unique constraint'))).toBeUndefined();
    expect(databaseOutageOf(pgError('42601', 'syntax error'))).toBeUndefined();
    expect(databaseOutageOf(new TypeError('x is undefined'))).toBeUndefined();
  });

  it('sends again only statements that cannot write: a SELECT naming no write, lock, sequence or advisory lock', () => {
    expect(isReadOnly('SELECT id FROM meta_txns WHERE chain_id = $1')).toBe(true);
    expect(isReadOnly(prepared('SELECT 1'))).toBe(true);
    expect(isReadOnly('  with x AS (SELECT 1) SELECT * FROM x')).toBe(true);
    for (const sql of [
      'INSERT INTO t VALUES (1)',
      'UPDATE t SET a = 1',
      'DELETE FROM t',
      'WITH d AS (DELETE FROM t RETURNING *) SELECT * FROM d',
      'SELECT id FROM gas_sponsors WHERE id = 1 FOR UPDATE',
      'SELECT id FROM t LIMIT 1 FOR NO KEY UPDATE SKIP LOCKED',
      'SELECT id FROM t FOR SHARE',
      "SELECT nextval('s')",
      'SELECT pg_try_advisory_lock(1)',
      'SELECT pg_advisory_xact_lock(1)',
      "SELECT set_config('x', 'y', false)",
      'VACUUM t',
      'BEGIN',
    ]) {
      expect(isReadOnly(sql), sql).toBe(false);
    }
  });
});
