import { describe, expect, it } from 'vitest';
import { rpc, type TestService } from '../support/service.ts';
import { bearer, type Call } from './support.ts';
import { consoleTestService } from '../support/console-env.ts';

const ADMIN = 'console-admin-token-0123456789';
let t: TestService;
let call: Call;
const admin = (method: string, body: unknown = {}) => call(method, body, bearer(ADMIN));

consoleTestService(ADMIN, (s, c) => {
  t = s;
  call = c;
});

describe('console: projects', () => {
  it("creates, renames and archives a project; an archived project's keys stop working", async () => {
    const c = await admin('CreateProject', { name: 'acme' });
    expect(c.status, JSON.stringify(c.body)).toBe(200);
    expect(c.body.project).toMatchObject({ name: 'acme', archivedAt: null, allowedChainIds: null, liveKeys: 0 });
    const id = c.body.project.id;

    const dup = await admin('CreateProject', { name: 'acme' });
    expect(dup.status).toBe(409);
    expect(dup.body.error).toBe('RequestConflict');

    const renamed = await admin('UpdateProject', { projectId: id, name: 'acme-prod' });
    expect(renamed.body.project.name).toBe('acme-prod');

    const key = await admin('CreateAccessKey', { projectId: id, label: 'backend' });
    const ping = () => rpc(t.app, '/rpc/Metadata/GetTask', { taskId: 999 }, { 'x-access-key': key.body.accessKey });
    expect((await ping()).body.error).toBe('NotFound');

    const archived = await admin('UpdateProject', { projectId: id, archived: true });
    expect(archived.body.project.archivedAt).not.toBeNull();
    expect((await ping()).body.error).toBe('Unauthorized');
    const noKey = await admin('CreateAccessKey', { projectId: id });
    expect(noKey.status).toBe(400);

    const restored = await admin('UpdateProject', { projectId: id, archived: false });
    expect(restored.body.project.archivedAt).toBeNull();
    expect((await ping()).body.error).toBe('NotFound');

    const list = await admin('ListProjects');
    expect(list.body.projects.find((p: { id: number }) => p.id === id)).toMatchObject({ name: 'acme-prod', liveKeys: 1 });
  });

  it('keeps allowed networks per project (empty list: all)', async () => {
    const c = await admin('CreateProject', { name: 'nets', allowedChainIDs: ['mainnet', '137'] });
    expect(c.body.project.allowedChainIds).toEqual([1, 137]);
    const all = await admin('UpdateProject', { projectId: c.body.project.id, allowedChainIDs: [] });
    expect(all.body.project.allowedChainIds).toBeNull();
    const bad = await admin('UpdateProject', { projectId: c.body.project.id, allowedChainIDs: ['atlantis'] });
    expect(bad.status).toBe(400);
    expect(bad.body.error).toBe('ChainNotFound');
  });

  it('answers bad input with a clear webrpc error, never a 500', async () => {
    const cases: [string, unknown, string][] = [
      ['CreateProject', {}, 'RequiredArgument'],
      ['CreateProject', { name: '   ' }, 'InvalidArgument'],
      ['UpdateProject', { projectId: 'one' }, 'InvalidArgument'],
      ['UpdateProject', { projectId: 424242, name: 'x' }, 'ProjectNotFound'],
      ['CreateAccessKey', { projectId: t.project.id, ratePerSec: -1 }, 'InvalidArgument'],
      ['RevokeAccessKey', { projectId: t.project.id, keyId: 424242 }, 'NotFound'],
      ['AddGasSponsor', { projectId: t.project.id, chainID: 'mainnet', address: '0x12' }, 'InvalidArgument'],
      ['AddGasSponsor', { projectId: t.project.id, chainID: 'mainnet', address: '0x' + '1'.repeat(40), kind: 'EVERYTHING' }, 'InvalidArgument'],
      ['AddGasSponsor', { projectId: t.project.id, chainID: 'mainnet', address: '0x' + '1'.repeat(40), dailyCapWei: '-5' }, 'InvalidArgument'],
      ['GetMetaTransaction', { chainID: 'mainnet', metaTxID: 'nope' }, 'InvalidArgument'],
    ];
    for (const [m, body, error] of cases) {
      const r = await admin(m, body);
      expect(r.status, `${m} ${JSON.stringify(body)}: ${JSON.stringify(r.body)}`).toBeLessThan(500);
      expect(r.body.error, `${m} ${JSON.stringify(body)}`).toBe(error);
    }
    const notJson = await t.app.inject({ method: 'POST', url: '/rpc/Console/ListProjects', headers: { 'content-type': 'application/json', ...bearer(ADMIN) }, payload: '{' });
    expect(notJson.statusCode).toBe(400);
  });
});

describe('console: access keys', () => {
  it('creates a key shown once, lists it by prefix with label, counts and last use, relabels and revokes it', async () => {
    const c = await admin('CreateAccessKey', { projectId: t.project.id, label: 'mobile', ratePerSec: 5, rateBurst: 10 });
    expect(c.status).toBe(200);
    const { accessKey, key } = c.body;
    expect(accessKey).toMatch(/^mr_/);
    expect(key).toMatchObject({ label: 'mobile', ratePerSec: 5, rateBurst: 10, rateLimit: { ratePerSec: 5, burst: 10 }, requestCount: 0, lastUsedAt: null });
    expect(accessKey.startsWith(key.prefix)).toBe(true);

    for (let i = 0; i < 3; i++) await rpc(t.app, '/rpc/Metadata/GetTask', { taskId: 1 }, { 'x-access-key': accessKey });
    await t.services.auth.flush();
    const listed = (await admin('ListAccessKeys', { projectId: t.project.id })).body.accessKeys.find((k: { id: number }) => k.id === key.id);
    expect(listed.requestCount).toBe(3);
    expect(listed.lastUsedAt).not.toBeNull();
    // The list never carries a key itself.
    expect(JSON.stringify(listed)).not.toContain(accessKey);

    const relabelled = await admin('UpdateAccessKey', { projectId: t.project.id, keyId: key.id, label: 'ios', defaultRateLimit: true });
    expect(relabelled.body.key).toMatchObject({ label: 'ios', ratePerSec: null, rateBurst: null, rateLimit: null, rateLimitIsDefault: true });

    // A key is revoked or changed only through its own project: another project's id finds nothing, and the row is untouched.
    const other = (await admin('CreateProject', { name: 'someone-else' })).body.project.id;
    expect((await admin('RevokeAccessKey', { projectId: other, keyId: key.id })).body.error).toBe('NotFound');
    expect((await admin('UpdateAccessKey', { projectId: other, keyId: key.id, label: 'taken' })).body.error).toBe('NotFound');
    const row = await t.testDb.db.query<{ label: string; revoked_at: Date | null }>('SELECT label, revoked_at FROM access_keys WHERE id = $1', [key.id]);
    expect(row.rows).toEqual([{ label: 'ios', revoked_at: null }]);

    expect((await admin('RevokeAccessKey', { projectId: t.project.id, keyId: key.id })).status).toBe(200);
    const after = (await admin('ListAccessKeys', { projectId: t.project.id })).body.accessKeys.find((k: { id: number }) => k.id === key.id);
    expect(after.revokedAt).not.toBeNull();
    expect((await admin('RevokeAccessKey', { projectId: t.project.id, keyId: key.id })).body.error).toBe('NotFound');
  });

  it('makes publishable and secret keys, holds a publishable one to origins, and rotates either kind: the new key works at once, the old one is refused', async () => {
    const pid = t.project.id;
    const collectionsCall = (key: string) => rpc(t.app, '/rpc/Collections/ListCollections', {}, { authorization: `Bearer ${key}` });
    const read = (key: string, origin?: string) => rpc(t.app, '/rpc/Metadata/GetTask', { taskId: 1 }, { 'x-access-key': key, ...(origin ? { origin } : {}) });

    const pub = (await admin('CreateAccessKey', { projectId: pid, label: 'web', allowedOrigins: ['https://App.Example/', 'https://app.example'] })).body;
    expect(pub.key).toMatchObject({ kind: 'publishable', allowedOrigins: ['https://app.example'] });
    expect(pub.accessKey).toMatch(/^mr_/);
    const sec = (await admin('CreateAccessKey', { projectId: pid, label: 'backend', kind: 'secret' })).body;
    expect(sec.key).toMatchObject({ kind: 'secret', allowedOrigins: null });
    expect(sec.accessKey).toMatch(/^mr_sk_/);
    expect((await collectionsCall(pub.accessKey)).body.error).toBe('PermissionDenied');
    expect((await collectionsCall(sec.accessKey)).status).toBe(200);
    expect((await read(pub.accessKey, 'https://evil.example')).body.error).toBe('InvalidOrigin');
    expect((await read(pub.accessKey, 'https://app.example')).body.error).toBe('NotFound');

    // The list says which is which.
    const listed = (await admin('ListAccessKeys', { projectId: pid })).body.accessKeys as Array<{ id: number; kind: string }>;
    expect(listed.find((k) => k.id === pub.key.id)?.kind).toBe('publishable');
    expect(listed.find((k) => k.id === sec.key.id)?.kind).toBe('secret');

    // Origins are edited (an empty list: any), and refused for a secret key or when they are no origins.
    expect((await admin('UpdateAccessKey', { projectId: pid, keyId: pub.key.id, allowedOrigins: [] })).body.key.allowedOrigins).toBeNull();
    expect((await read(pub.accessKey, 'https://evil.example')).body.error).toBe('NotFound');
    expect((await admin('UpdateAccessKey', { projectId: pid, keyId: pub.key.id, allowedOrigins: ['https://app.example'] })).body.key.allowedOrigins).toEqual(['https://app.example']);
    expect((await read(pub.accessKey, 'https://evil.example')).body.error).toBe('InvalidOrigin');
    expect((await admin('UpdateAccessKey', { projectId: pid, keyId: sec.key.id, allowedOrigins: ['https://app.example'] })).body.error).toBe('InvalidArgument');
    expect((await admin('CreateAccessKey', { projectId: pid, kind: 'secret', allowedOrigins: ['https://app.example'] })).body.error).toBe('InvalidArgument');
    expect((await admin('CreateAccessKey', { projectId: pid, allowedOrigins: ['javascript:alert(1)'] })).body.error).toBe('InvalidArgument');
    expect((await admin('CreateAccessKey', { projectId: pid, kind: 'root' })).body.error).toBe('InvalidArgument');

    // Rotation: same kind, label and origins; the old key stops at once.
    const rs = (await admin('RotateAccessKey', { projectId: pid, keyId: sec.key.id })).body;
    expect(rs.accessKey).toMatch(/^mr_sk_/);
    expect(rs.key).toMatchObject({ kind: 'secret', label: 'backend', revokedAt: null });
    expect((await collectionsCall(sec.accessKey)).body.error).toBe('Unauthorized');
    expect((await collectionsCall(rs.accessKey)).status).toBe(200);
    const rp = (await admin('RotateAccessKey', { projectId: pid, keyId: pub.key.id })).body;
    expect(rp.key).toMatchObject({ kind: 'publishable', label: 'web', allowedOrigins: ['https://app.example'] });
    expect((await read(pub.accessKey)).body.error).toBe('Unauthorized');
    expect((await read(rp.accessKey, 'https://evil.example')).body.error).toBe('InvalidOrigin');
    const rows = await t.testDb.db.query<{ id: string; revoked: boolean }>('SELECT id::text, revoked_at IS NOT NULL AS revoked FROM access_keys WHERE id = ANY($1::bigint[]) ORDER BY id', [
      [sec.key.id, pub.key.id],
    ]);
    expect(rows.rows.map((r) => r.revoked)).toEqual([true, true]);
    // A revoked key, or another project's, is not rotated.
    expect((await admin('RotateAccessKey', { projectId: pid, keyId: sec.key.id })).body.error).toBe('NotFound');
    const other = (await admin('CreateProject', { name: 'rotate-other' })).body.project.id;
    expect((await admin('RotateAccessKey', { projectId: other, keyId: rs.key.id })).body.error).toBe('NotFound');
    expect((await admin('RevokeAccessKey', { projectId: pid, keyId: rs.key.id })).status).toBe(200);
    expect((await collectionsCall(rs.accessKey)).body.error).toBe('Unauthorized');
  });
});
