// The CLI never surprises: usage and --help for every command without opening (creating, migrating)
// a database, `serve` without a config refused in one line, empty lists said so. Real processes of
// the binary, run together, in an empty folder that must stay empty.
import { spawn } from 'node:child_process';
import { mkdtempSync, readdirSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { exampleHint } from '../src/cli/dev-banner.ts';
import { SOURCE_BIN, runNode, type CliResult } from './support/cli.ts';
import { freePort } from './support/ports.ts';

const cwd = mkdtempSync(join(tmpdir(), 'metarelay-cli-usage-'));
afterAll(() => rmSync(cwd, { recursive: true, force: true }));

// DATABASE_URL unset: the default database is a folder under the current one, which must not appear.
const env = Object.fromEntries(Object.entries(process.env).filter(([k]) => k !== 'DATABASE_URL'));

function run(...args: string[]): Promise<CliResult> {
  return new Promise((resolve) => {
    const child = spawn(process.execPath, [SOURCE_BIN, ...args], { cwd, env, stdio: ['ignore', 'pipe', 'pipe'] });
    let stdout = '';
    let stderr = '';
    child.stdout.on('data', (d) => (stdout += d));
    child.stderr.on('data', (d) => (stderr += d));
    child.on('close', (code) => resolve({ code, stdout, stderr }));
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

  it("prints the gasless example's command with the manifest it reads, and the example says in one line what is missing", async () => {
    const dir = mkdtempSync(join(tmpdir(), 'metarelay-example-'));
    try {
      // The banner's line, as printed for a manifest outside .metarelay/ of the current folder.
      const manifest = join(dir, 'elsewhere', 'dev.json');
      const [line] = exampleHint(manifest, (p) => p);
      const m = line.match(/^ {2}METARELAY_MANIFEST=(\S+) node (\S+) {3}\(/);
      expect(m, line).not.toBeNull();
      expect(m![1]).toBe(manifest);
      // Run as printed: no manifest there yet.
      const missing = await runNode([m![2]], { METARELAY_MANIFEST: m![1] });
      expect([missing.code, missing.stdout]).toEqual([1, '']);
      expect(missing.stderr.trim().split('\n')).toEqual([
        `relay-gasless: no dev manifest at ${manifest}: start \`npm start\` (metarelay dev) first, or set METARELAY_MANIFEST to the path its banner prints`,
      ]);
      // A manifest of a service that is not running.
      const down = join(dir, 'down.json');
      const port = await freePort();
      writeFileSync(down, JSON.stringify({ baseUrl: `http://127.0.0.1:${port}`, chain: { rpcUrl: `http://127.0.0.1:${port}`, chainId: 31337 } }));
      const stopped = await runNode([m![2]], { METARELAY_MANIFEST: down });
      expect(stopped.code).toBe(1);
      expect(stopped.stderr.trim().split('\n')).toEqual([`relay-gasless: metarelay is not answering at http://127.0.0.1:${port}/health (ECONNREFUSED): is \`npm start\` (metarelay dev) running?`]);
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });
});
