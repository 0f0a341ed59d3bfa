// The CLI never surprises: usage and --help for every command without opening (creating, migrating)
// a database, `serve` without a config refused in one line, empty lists said so. Real processes of
// the binary, run together, in an empty folder that must stay empty.
import { spawn } from 'node:child_process';
import { mkdtempSync, readdirSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { BIN, type CliResult } from './support/cli.ts';

const cwd = mkdtempSync(join(tmpdir(), 'metarelay-cli-usage-'));
afterAll(() => rmSync(cwd, { recursive: true, force: true }));

// DATABASE_URL unset: the default database is a folder under the current one, which must not appear.
const env = Object.fromEntries(Object.entries(process.env).filter(([k]) => k !== 'DATABASE_URL'));

function run(...args: string[]): Promise<CliResult> {
  return new Promise((resolve) => {
    const child = spawn(process.execPath, [BIN, ...args], { cwd, env, stdio: ['ignore', 'pipe', 'pipe'] });
    let stdout = '';
    let stderr = '';
    child.stdout.on('data', (d) => (stdout += d));
    child.stderr.on('data', (d) => (stderr += d));
    child.on('exit', (code) => resolve({ code, stdout, stderr }));
  });
}

describe('metarelay usage', () => {
  it('answers usage and --help without touching a database, refuses serve without a config, and says a list is empty', async () => {
    const emptyDb = join(cwd, '..', `${cwd.split('/').pop()}-db`);
    const [projects, keys, backfill, serve, serveHelp, keysHelp, indexerHelp, list] = await Promise.all([
      run('projects'),
      run('keys', 'create'),
      run('indexer', 'backfill'),
      run('serve'),
      run('serve', '--help'),
      run('keys', 'list', '--help'),
      run('indexer', '-h'),
      run('projects', 'list', '--database', emptyDb),
    ]);
    try {
      expect([projects.code, projects.stderr]).toEqual([2, expect.stringContaining('metarelay projects create NAME')]);
      expect([keys.code, keys.stderr]).toEqual([2, expect.stringContaining('keys create --project NAME')]);
      expect([backfill.code, backfill.stderr]).toEqual([2, expect.stringContaining('indexer backfill --chain')]);
      expect(serve.code).toBe(2);
      expect(serve.stderr.trim().split('\n')).toEqual([expect.stringMatching(/^metarelay: serve needs a config: metarelay serve --config metarelay.json/)]);
      expect([serveHelp.code, serveHelp.stdout]).toEqual([0, expect.stringContaining('metarelay serve --config')]);
      expect([keysHelp.code, keysHelp.stdout]).toEqual([0, expect.stringContaining('metarelay keys revoke KEY')]);
      expect(keysHelp.stdout).not.toContain('projects');
      expect([indexerHelp.code, indexerHelp.stdout]).toEqual([0, expect.stringContaining('metarelay indexer work')]);
      // Nothing was created where the commands ran.
      expect(readdirSync(cwd)).toEqual([]);
      // An empty list: nothing on stdout (scripts read JSON lines there), the note on stderr.
      expect([list.code, list.stdout, list.stderr.trim()]).toEqual([0, '', 'no projects yet: metarelay projects create NAME']);
    } finally {
      rmSync(emptyDb, { recursive: true, force: true });
    }
  });
});
