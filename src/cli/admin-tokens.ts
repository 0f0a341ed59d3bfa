import { parse } from './args.ts';
import { DB_FLAGS, withDb } from './db.ts';
import { UsageError } from './usage-error.ts';
import { adminTokenStore } from '../access/admin-tokens.ts';

/** `metarelay admin create [--label L]` prints a new admin token once; `admin revoke ID` ends one. */
export async function runAdmin(argv: string[]) {
  const { values, positionals } = parse(argv, { ...DB_FLAGS, label: { type: 'string' } });
  const [sub, arg] = positionals;
  // Checked before withDb opens (and would create and migrate) a database.
  if (sub === 'revoke' && !arg) throw new UsageError('usage: metarelay admin revoke ID');
  await withDb(values, async (db, config) => {
    const tokens = adminTokenStore(db, config.admin.tokens);
    if (sub === 'create') {
      const { token, id } = await tokens.create(values.label ?? '');
      console.log(JSON.stringify({ id, adminToken: token }));
      console.error('Store this token now: it is kept only as a hash and cannot be shown again. Sign in at /console with it.');
    } else if (sub === 'revoke') {
      const id = Number(arg);
      if (!Number.isInteger(id) || id <= 0) throw new UsageError('usage: metarelay admin revoke ID');
      if (!(await tokens.revoke(id))) throw new UsageError(`no live admin token ${id}`);
      console.log('revoked');
    } else {
      throw new UsageError('usage: metarelay admin create [--label TEXT] | admin revoke ID');
    }
  });
}
