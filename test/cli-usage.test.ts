// The CLI never surprises: usage and --help for every command without opening (creating, migrating)
// a database, `serve` without a config refused in one line, empty lists said so. The built binary, in
// an empty folder that must stay empty: the many usage answers in one process (runBatch: a node per
// command was ~0.2 s of CPU each before it did anything), the long-running commands' refusals, the
// checkout's bin and the list checks' first answers each as a process of its own.
import { spawn } from 'node:child_process';
import { createServer as createNetServer, type AddressInfo } from 'node:net';
import { cpSync, existsSync, mkdirSync, mkdtempSync, readdirSync, renameSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, describe, expect, inject, it } from 'vitest';
import { exampleHint } from '../src/cli/dev-banner.ts';
import { builtBin } from './support/build.ts';
import { SOURCE_BIN, runBatch, runNode, type CliResult } from './support/cli.ts';
import { freePort } from './support/ports.ts';

const cwd = mkdtempSync(join(tmpdir(), 'metarelay-cli-usage-'));
afterAll(() => rmSync(cwd, { recursive: true, force: true }));

// DATABASE_URL unset: the default database is a folder under the current one, which must not appear.
const env = Object.fromEntries(Object.entries(process.env).filter(([k]) => k !== 'DATABASE_URL'));

/** The CLI as the package runs it (the build, plain node); `fromSource`: the checkout's bin through tsx, as `npm start` runs it. */
function runWith(fromSource: boolean, args: string[], inDir = cwd): Promise<CliResult> {
  return new Promise((resolve) => {
    const child = spawn(process.execPath, fromSource ? [SOURCE_BIN, ...args] : ['--liftoff-only', builtBin(), ...args], { cwd: inDir, env, stdio: ['ignore', 'pipe', 'pipe'] });
    let stdout = '';
    let stderr = '';
    child.stdout.on('data', (d) => (stdout += d));
    child.stderr.on('data', (d) => (stderr += d));
    // A command that hangs (rather than exiting) is killed and shows as code null.
    const timer = setTimeout(() => child.kill('SIGKILL'), 120_000);
    child.on('close', (code) => {
      clearTimeout(timer);
      resolve({ code, stdout, stderr });
    });
  });
}
const run = (...args: string[]) => runWith(false, args);

/** Every command of the usage, each answering `--help`. */
const COMMANDS = 'dev serve worker relayer refresh indexer migrate doctor config projects keys admin sponsors ecosystems webhooks tokenlist contracts'.split(' ');

/** Runs them one after the other in one process of the built CLI, here. */
const runAll = (argvs: string[][]) => runBatch(argvs, { cwd, env });

describe('metarelay usage', () => {
  it('answers --help for every command, and usage for a command without a verb or without what its verb needs, without touching a database', async () => {
    const helps = await runAll(COMMANDS.map((c) => [c, '--help']));
    for (const [i, c] of COMMANDS.entries()) {
      expect([c, helps[i].code, helps[i].stderr]).toEqual([c, 0, '']);
      expect(helps[i].stdout, c).toMatch(new RegExp(`^Usage:\\n  metarelay ${c}\\b`));
    }
    // Each refused with code 2 and its usage (or the one line that fixes it) on stderr, before a database is opened.
    const refused: [string[], string][] = [
      [['projects'], 'metarelay projects create NAME'],
      [['keys'], 'metarelay keys create --project NAME'],
      [['keys', 'create'], 'keys create --project NAME'],
      [['keys', 'revoke'], 'metarelay keys revoke KEY'],
      [['admin'], 'metarelay admin create'],
      [['admin', 'revoke'], 'metarelay admin revoke ID'],
      [['sponsors'], 'metarelay sponsors add'],
      [['sponsors', 'add'], 'sponsors add --project NAME'],
      [['ecosystems'], 'metarelay ecosystems add NAME'],
      [['ecosystems', 'join'], 'usage:'],
      [['webhooks'], 'metarelay webhooks add'],
      [['webhooks', 'add'], 'webhooks add --project NAME --url URL'],
      [['webhooks', 'list'], 'webhooks list --project NAME'],
      [['webhooks', 'remove'], 'webhooks remove ID'],
      [['indexer'], 'metarelay indexer backfill'],
      [['indexer', 'backfill'], 'indexer backfill --chain'],
      [['indexer', 'work'], 'indexer work needs a config'],
      [['indexer', 'status'], 'indexer status ID'],
      [['tokenlist'], 'metarelay tokenlist import'],
      [['tokenlist', 'import'], 'tokenlist import <file-or-url>'],
      [['contracts'], 'metarelay contracts override'],
      [['contracts', 'override'], 'contracts override --chain'],
      [['refresh'], 'metarelay refresh --chain'],
      [['config'], 'metarelay config --print'],
      // No config, no --database, no DATABASE_URL and no dev database here: refused, not a new database made.
      [['admin', 'create'], 'no database named: give --config FILE'],
      [['projects', 'list'], 'no database named: give --config FILE'],
      [['migrate'], 'no database named: give --config FILE'],
      [['serve'], 'metarelay: serve needs a config: metarelay serve --config metarelay.json'],
      [['worker'], 'metarelay: worker needs a config: metarelay worker --config metarelay.json'],
      [['relayer'], 'metarelay: relayer needs a config: metarelay relayer --config metarelay.json'],
    ];
    // The long-running commands (the last three) as processes of their own: what a shell sees of a refusal.
    const answers = [...(await runAll(refused.slice(0, -3).map(([argv]) => argv))), ...(await Promise.all(refused.slice(-3).map(([argv]) => run(...argv))))];
    for (const [i, [argv, usage]] of refused.entries()) {
      expect([argv.join(' '), answers[i].code, answers[i].stdout], answers[i].stderr).toEqual([argv.join(' '), 2, '']);
      expect(answers[i].stderr, argv.join(' ')).toContain(usage);
    }
    // The long-running commands refuse in one line.
    for (const i of [refused.length - 3, refused.length - 2, refused.length - 1]) expect(answers[i].stderr.trim().split('\n')).toHaveLength(1);
    // The same from the checkout's bin (`npm start`'s way, through tsx).
    const [serve, projects, help] = await Promise.all([runWith(true, ['serve']), runWith(true, ['projects']), runWith(true, ['keys', 'list', '--help'])]);
    expect([serve.code, serve.stderr.trim().split('\n')]).toEqual([2, [expect.stringMatching(/^metarelay: serve needs a config: metarelay serve --config metarelay.json/)]]);
    expect([projects.code, projects.stderr]).toEqual([2, expect.stringContaining('metarelay projects create NAME')]);
    expect([help.code, help.stdout]).toEqual([0, expect.stringContaining('metarelay keys revoke KEY')]);
    // Nothing was created where the commands ran.
    expect(readdirSync(cwd)).toEqual([]);
  });

  it("warns that a stop cannot drain only where npm is PID 1 with a shell before the server, not where npm's own parent is PID 1 (systemd)", async () => {
    // The process whose parent must become PID 1 waits for it (its starter exits at once), says so, then
    // becomes npm's stand-in (a node that starts the bin: npm execs a script's `exec node …`) or stays
    // the shell between npm and the server (`npx metarelay …`, npm's script shell).
    const dir = mkdtempSync(join(tmpdir(), 'metarelay-pid1-'));
    try {
      writeFileSync(
        join(dir, 'orphan.sh'),
        [
          'i=0',
          'while [ "$(cut -d" " -f4 /proc/$$/stat)" != 1 ] && [ $i -lt 400 ]; do sleep 0.05; i=$((i+1)); done',
          'echo "parent $(cut -d" " -f4 /proc/$$/stat)"',
          'if [ "$1" = npm ]; then exec "$NODE" -e "$NPM_STAND_IN"; fi',
          '"$NODE" "$BIN" serve',
        ].join('\n'),
      );
      const orphan = (mode: 'npm' | 'shell') =>
        new Promise<CliResult>((resolve) => {
          const stand = `require('node:child_process').spawn(process.execPath, [process.env.BIN, 'serve'], { stdio: 'inherit' }).on('close', (c) => process.exit(c ?? 1))`;
          const child = spawn('sh', ['-c', `sh ${join(dir, 'orphan.sh')} ${mode} &`], {
            cwd,
            env: { ...env, NODE: process.execPath, BIN: builtBin(), NPM_STAND_IN: stand, npm_lifecycle_event: 'serve' },
            stdio: ['ignore', 'pipe', 'pipe'],
          });
          let stdout = '';
          let stderr = '';
          child.stdout.on('data', (d) => (stdout += d));
          child.stderr.on('data', (d) => (stderr += d));
          // The pipes close once the orphan and the bin are gone, long after the starter's exit.
          child.on('close', () => resolve({ code: null, stdout, stderr }));
        });
      const [npm, shell] = await Promise.all([orphan('npm'), orphan('shell')]);
      for (const r of [npm, shell]) {
        expect(r.stdout, 'no subreaper between this test and PID 1').toContain('parent 1');
        expect(r.stderr).toContain('serve needs a config');
      }
      expect(npm.stderr).not.toContain('npm is PID 1 here');
      expect(shell.stderr).toContain('metarelay: npm is PID 1 here');
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });

  it('says on stderr that a list is empty, and writes nothing on stdout (scripts read JSON lines there)', async () => {
    // A migrated database of its own (a copy of the run's PGlite template: this file runs in the PGlite
    // half only), not one made here: creating and migrating a folder was 3 s of CPU, and is not what
    // is checked (cli-dev's newcomer start creates one).
    const emptyDb = join(cwd, '..', `${cwd.split('/').pop()}-db`);
    cpSync(inject('dbTemplate'), emptyDb, { recursive: true });
    const db = ['--database', emptyDb];
    try {
      // A process of its own: what a script reading stdout sees.
      const projects = await run('projects', 'list', ...db);
      expect([projects.code, projects.stdout, projects.stderr.trim()]).toEqual([0, '', 'no projects yet: metarelay projects create NAME']);
      // The rest one after the other in one process (a PGlite folder takes one process at a time).
      const lists = [
        ['keys', 'list', '--project', 'empty'],
        ['sponsors', 'list', '--project', 'empty'],
        ['webhooks', 'list', '--project', 'empty'],
      ];
      const [created, ...answers] = await runAll([['projects', 'create', 'empty'], ...lists, ['ecosystems', 'list']].map((argv) => [...argv, ...db]));
      expect(created.code, created.stderr).toBe(0);
      for (const [i, list] of lists.entries()) {
        const r = answers[i];
        expect([list.join(' '), r.code, r.stdout]).toEqual([list.join(' '), 0, '']);
        expect(r.stderr.trim().split('\n'), list.join(' ')).toEqual([expect.stringMatching(/^no [a-z ]+ in project empty: metarelay /)]);
      }
      const ecosystems = answers[lists.length];
      expect([ecosystems.code, ecosystems.stdout, ecosystems.stderr.trim()]).toEqual([0, '', 'no ecosystems yet: metarelay ecosystems add NAME']);
      expect(readdirSync(cwd)).toEqual([]);
      // Where the dev database exists (a checkout after `npm start`), a command without --config uses it, and says so.
      const checkout = mkdtempSync(join(tmpdir(), 'metarelay-checkout-'));
      try {
        mkdirSync(join(checkout, '.metarelay'));
        renameSync(emptyDb, join(checkout, '.metarelay', 'db'));
        const used = await runWith(false, ['projects', 'list'], checkout);
        expect([used.code, used.stderr.trim().split('\n')]).toEqual([0, [`metarelay: no --config: using the dev database at ${join(checkout, '.metarelay', 'db')}`]]);
        expect(used.stdout).toContain('"name":"empty"');
      } finally {
        rmSync(checkout, { recursive: true, force: true });
      }
    } finally {
      rmSync(emptyDb, { recursive: true, force: true });
    }
  });

  it('refuses a taken port at once, naming --port, before opening anything (serve: its database; dev: its chain)', async () => {
    const dir = mkdtempSync(join(tmpdir(), 'metarelay-taken-port-'));
    const taken = createNetServer();
    await new Promise<void>((r) => taken.listen(0, '127.0.0.1', r));
    const takenPort = (taken.address() as AddressInfo).port;
    try {
      const folder = join(dir, 'db');
      writeFileSync(join(dir, 'taken.json'), JSON.stringify({ port: takenPort, database: folder, chains: [] }));
      const [serve, dev] = await Promise.all([
        runWith(false, ['serve', '--config', join(dir, 'taken.json')], dir),
        runWith(false, ['dev', '--port', String(takenPort), '--data', join(dir, 'dev')], dir),
      ]);
      const takenLine = `metarelay: port ${takenPort} on 127.0.0.1 is in use (another metarelay, or another server): stop it, or choose another port with --port N or PORT=N`;
      // One line, no stack trace, and before the database (its folder is not made) or the dev chain (not started).
      expect([serve.code, serve.stderr.trim().split('\n'), existsSync(folder)]).toEqual([2, [takenLine], false]);
      expect([dev.code, dev.stderr.trim().split('\n')]).toEqual([2, [takenLine]]);
      expect(dev.stdout).not.toContain('anvil');
    } finally {
      taken.close();
      rmSync(dir, { recursive: true, force: true });
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
