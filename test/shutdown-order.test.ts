// A signal sent to a whole process group reaches the server and npm's shell at once; the bin's watch of
// the shell (PARENT_SIGNAL) and the server's own copy of the signal can then be handled in either order.
// Whichever comes first starts the one drain; the other is not a second signal. Seen under load in
// package-signals ("npx metarelay serve", SIGINT to the process group): the watch's timer ran first and
// the server's own SIGINT, handled after it, exited at once as a "second signal" with the drain cut short.
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { runNode } from './support/cli.ts';

const dir = mkdtempSync(join(tmpdir(), 'metarelay-shutdown-'));
afterAll(() => rmSync(dir, { recursive: true, force: true }));

/** A process with the CLI's shutdown handling, a drain of `drainMs`, and the signals sent to itself in a chosen order. */
function script(steps: string, drainMs: number): string {
  const file = join(dir, `s-${Math.random().toString(36).slice(2)}.ts`);
  writeFileSync(
    file,
    `import { onShutdown, PARENT_SIGNAL, SAME_SIGNAL_MS } from ${JSON.stringify(resolve('src/cli/shutdown.ts'))};
import { createLogger } from ${JSON.stringify(resolve('src/telemetry/logger.ts'))};
const log = createLogger('info');
onShutdown(log, { drain: () => new Promise((r) => setTimeout(r, ${drainMs})), close: async () => log.info('closed') });
setInterval(() => undefined, 1000);
${steps}
`,
  );
  return file;
}
const run = (steps: string, drainMs = 300) => runNode(['--import', 'tsx', script(steps, drainMs)], {}, 30_000);

describe('one drain for a signal sent to the process group', () => {
  it("the shell's signal first, then the server's own copy of it: drained and closed, exit 0", async () => {
    const r = await run(`process.emit(PARENT_SIGNAL, 'SIGINT');\nprocess.kill(process.pid, 'SIGINT');`);
    expect(r.stdout, r.stdout + r.stderr).toMatch(
      /"msg":"shutting down: draining"[\s\S]*"msg":"the same signal reached this process too: still draining"[\s\S]*"msg":"closed"[\s\S]*"msg":"shut down cleanly"/,
    );
    expect(r.stdout).not.toContain('second signal');
    expect(r.code).toBe(0);
  });

  it("the server's own signal first, then the shell's: one drain, exit 0", async () => {
    const r = await run(`process.kill(process.pid, 'SIGTERM');\nsetTimeout(() => process.emit(PARENT_SIGNAL, 'SIGTERM'), 50);`);
    expect(r.stdout, r.stdout + r.stderr).toMatch(/"msg":"shutting down: draining"[\s\S]*"msg":"shut down cleanly"/);
    expect(r.stdout).not.toContain('second signal');
    expect(r.code).toBe(0);
  });

  it("the same signal twice at once (a terminal's Ctrl-C to npm start: node's own, then npm's copy) is one drain, exit 0", async () => {
    const r = await run(`process.kill(process.pid, 'SIGINT');\nsetTimeout(() => process.kill(process.pid, 'SIGINT'), 100);`);
    expect(r.stdout, r.stdout + r.stderr).toMatch(/"msg":"shutting down: draining"[\s\S]*"msg":"the same signal again at once[^"]*"[\s\S]*"msg":"closed"[\s\S]*"msg":"shut down cleanly"/);
    expect(r.stdout).not.toContain('second signal');
    expect(r.code).toBe(0);
  });

  it('a further signal after that is a second signal: it exits at once', async () => {
    // After the window in which the same signal is the same Ctrl-C: a person pressing it again to force the exit.
    const r = await run(`process.emit(PARENT_SIGNAL, 'SIGINT');\nprocess.kill(process.pid, 'SIGINT');\nsetTimeout(() => process.kill(process.pid, 'SIGINT'), SAME_SIGNAL_MS + 200);`, 60_000);
    expect(r.stdout, r.stdout + r.stderr).toContain('second signal: exiting now');
    expect(r.stdout).not.toContain('shut down cleanly');
    expect(r.code).toBe(130);
  });

  it('a different signal during a drain the shell started is a second signal', async () => {
    const r = await run(`process.emit(PARENT_SIGNAL, 'SIGTERM');\nsetTimeout(() => process.kill(process.pid, 'SIGINT'), 50);`);
    expect(r.stdout, r.stdout + r.stderr).toContain('second signal: exiting now');
    expect(r.code).toBe(130);
  });
});
