import { describe, expect, it } from 'vitest';
import { adminTokenStore } from '../../src/access/admin-tokens.ts';
import { openDb } from '../../src/store/db.ts';
import { runCli } from '../support/cli.ts';
import { createTestDb } from '../support/db.ts';
import { rpc, type TestService } from '../support/service.ts';
import { bearer, signIn, type Call } from './support.ts';
import { consoleTestService } from '../support/console-env.ts';

const ADMIN = 'console-admin-token-0123456789';
let t: TestService;
let call: Call;

consoleTestService(ADMIN, (s, c) => {
  t = s;
  call = c;
});

/** An error answer in the webrpc shape, carrying no data. */
function refused(r: { status: number; body: any }, status: number, error: string) {
  expect(r.status, JSON.stringify(r.body)).toBe(status);
  expect(r.body.error).toBe(error);
  expect(Object.keys(r.body).sort()).toEqual(['cause', 'code', 'error', 'message', 'msg', 'status']);
}

describe('console: who may call the admin API', () => {
  it('refuses an anonymous call with Unauthorized (401), and gives no data', async () => {
    refused(await call('ListProjects'), 401, 'Unauthorized');
    refused(await call('Health'), 401, 'Unauthorized');
  });

  it('refuses a project access key with PermissionDenied (403)', async () => {
    refused(await call('ListProjects', {}, { 'x-access-key': t.accessKey }), 403, 'PermissionDenied');
    // Nor does an access key pass for an admin token.
    refused(await call('ListProjects', {}, bearer(t.accessKey)), 401, 'Unauthorized');
  });

  it('accepts the admin token of the config as a bearer token', async () => {
    const r = await call('ListProjects', {}, bearer(ADMIN));
    expect(r.status).toBe(200);
    expect(r.body.projects.map((p: { name: string }) => p.name)).toContain(t.project.name);
  });

  it('signs in with an admin token into an HttpOnly, SameSite=Strict session cookie, and signs out', async () => {
    refused(await call('SignIn', { token: 'not-the-admin-token-at-all' }), 401, 'Unauthorized');
    const { cookie, setCookie } = await signIn(call, ADMIN);
    expect(setCookie).toMatch(/HttpOnly/);
    expect(setCookie).toMatch(/SameSite=Strict/);
    expect(setCookie).toMatch(/Path=\//);
    // The cookie holds a random secret, never the admin token.
    expect(setCookie).not.toContain(ADMIN);
    expect((await call('Session', {}, { cookie })).body).toEqual({ state: 'valid' });
    expect((await call('ListProjects', {}, { cookie })).status).toBe(200);

    // Only a digest of the session is stored.
    const secret = cookie.split('=')[1];
    const stored = await t.services.db.query<{ id_hash: string }>('SELECT id_hash FROM console_sessions');
    expect(stored.rows.length).toBeGreaterThan(0);
    expect(stored.rows.some((r) => r.id_hash.includes(secret))).toBe(false);

    const out = await call('SignOut', {}, { cookie });
    expect(out.status).toBe(200);
    expect(String(out.headers['set-cookie'])).toMatch(/Max-Age=0/);
    refused(await call('ListProjects', {}, { cookie }), 401, 'Unauthorized');
  });

  it('answers SessionExpired (403) once the session has run out', async () => {
    const { cookie } = await signIn(call, ADMIN);
    expect((await call('ListProjects', {}, { cookie })).status).toBe(200);
    await t.services.db.query(`UPDATE console_sessions SET expires_at = now() - interval '1 second'`);
    refused(await call('ListProjects', {}, { cookie }), 403, 'SessionExpired');
    expect((await call('Session', {}, { cookie })).body).toEqual({ state: 'expired' });
  });

  it('accepts an admin token made in the database (kept only as a hash) for sign-in and as a bearer', async () => {
    const tokens = adminTokenStore(t.services.db, []);
    const { token, id } = await tokens.create('ops');
    expect((await call('ListProjects', {}, bearer(token))).status).toBe(200);
    const { cookie } = await signIn(call, token);
    expect((await call('ListProjects', {}, { cookie })).status).toBe(200);
    // The same operator token works on the other admin APIs (here /rpc/Admin/).
    const admin = () => rpc(t.app, '/rpc/Admin/GetContractInfoOverrides', {}, bearer(token));
    expect((await admin()).status).toBe(200);
    await tokens.revoke(id);
    refused(await call('ListProjects', {}, bearer(token)), 401, 'Unauthorized');
    // The session it signed in ends with it (issue 29: it used to live out its 12 hours).
    refused(await call('ListProjects', {}, { cookie }), 401, 'Unauthorized');
    expect((await call('Session', {}, { cookie })).body).toEqual({ state: 'none' });
    refused(await call('SignIn', { token }), 401, 'Unauthorized');
    expect((await admin()).status).toBe(401);
  });

  it("signs out everywhere: every session of the caller's admin token ends, another token's does not", async () => {
    const { token } = await adminTokenStore(t.services.db, []).create('other operator');
    const [a, b, other] = [await signIn(call, ADMIN), await signIn(call, ADMIN), await signIn(call, token)];
    const live = async () => Number((await t.services.db.query<{ n: string }>('SELECT count(*)::text AS n FROM console_sessions WHERE ended_at IS NULL')).rows[0].n);
    const before = await live();
    const r = await call('SignOutEverywhere', {}, { cookie: a.cookie });
    expect(r.status, JSON.stringify(r.body)).toBe(200);
    expect(r.body.ended).toBeGreaterThanOrEqual(2);
    expect(String(r.headers['set-cookie'])).toMatch(/Max-Age=0/);
    expect(await live()).toBe(before - r.body.ended);
    refused(await call('ListProjects', {}, { cookie: a.cookie }), 401, 'Unauthorized');
    refused(await call('ListProjects', {}, { cookie: b.cookie }), 401, 'Unauthorized');
    expect((await call('ListProjects', {}, { cookie: other.cookie })).status).toBe(200);
    // As a bearer (a script): the sessions of that token.
    expect((await call('SignOutEverywhere', {}, bearer(token))).body).toMatchObject({ ok: true, ended: 1 });
    refused(await call('ListProjects', {}, { cookie: other.cookie }), 401, 'Unauthorized');
    // Not signed in at all: nothing to end, and no answer but Unauthorized.
    refused(await call('SignOutEverywhere', {}), 401, 'Unauthorized');
  });

  it('after 10 failed sign-ins from one address, that address waits (RateLimited + Retry-After), even with the right token; others do not', async () => {
    const signInFrom = (remoteAddress: string, token: string) =>
      t.app.inject({ method: 'POST', url: '/rpc/Console/SignIn', remoteAddress, headers: { 'content-type': 'application/json' }, payload: JSON.stringify({ token }) });
    for (let i = 0; i < 10; i++) expect((await signInFrom('10.9.8.7', `wrong-token-${i}-0123456789`)).statusCode).toBe(401);
    const blocked = await signInFrom('10.9.8.7', ADMIN);
    expect(blocked.statusCode).toBe(429);
    expect(blocked.json().error).toBe('RateLimited');
    expect(Number(blocked.headers['retry-after'])).toBeGreaterThan(0);
    expect((await signInFrom('10.9.8.8', ADMIN)).statusCode).toBe(200);
  });

  it('refuses a revoked access key on the next call', async () => {
    const created = await call('CreateAccessKey', { projectId: t.project.id, label: 'soon revoked' }, bearer(ADMIN));
    expect(created.status).toBe(200);
    const key = created.body.accessKey as string;
    const status = () => rpc(t.app, '/rpc/Metadata/GetTask', { taskId: 1 }, { 'x-access-key': key });
    expect((await status()).body.error).toBe('NotFound'); // the key passes; the task just is not there
    expect((await call('RevokeAccessKey', { projectId: t.project.id, keyId: created.body.key.id }, bearer(ADMIN))).status).toBe(200);
    refused(await status(), 401, 'Unauthorized');
  });
});

describe('metarelay admin create', () => {
  it('prints a new admin token once and stores only its hash', async () => {
    const other = await createTestDb();
    // PGlite is one process's: let the CLI open the database alone.
    await other.db.close();
    try {
      const out = await runCli(['admin', 'create', '--label', 'cli', '--database', other.location]);
      expect(out.code, out.stderr).toBe(0);
      const { adminToken } = JSON.parse(out.stdout.trim());
      expect(adminToken).toMatch(/^mra_[A-Za-z0-9_-]{43}$/);
      expect(out.stderr).toMatch(/cannot be shown again/);
      const db = await openDb(other.location);
      try {
        expect(await adminTokenStore(db, []).verify(adminToken)).toBe(true);
        const rows = await db.query<{ token_hash: string; label: string }>('SELECT token_hash, label FROM admin_tokens');
        expect(rows.rows).toHaveLength(1);
        expect(rows.rows[0].label).toBe('cli');
        expect(rows.rows[0].token_hash).not.toContain(adminToken.slice(4));
      } finally {
        await db.close();
      }
    } finally {
      await other.drop();
    }
  });
});
