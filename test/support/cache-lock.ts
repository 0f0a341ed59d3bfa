// What the test caches built once and shared between test processes (support/build.ts: the compiled
// CLI; support/package.ts: the packed and installed tarball) both need: the files a cache key is
// hashed from, and whether a builder's lock folder was left by a process that died.
import { readdirSync, readFileSync, statSync } from 'node:fs';
import { join } from 'node:path';

/** Every file under `path` (or `path` itself), in a stable order. */
export function files(path: string): string[] {
  if (!statSync(path).isDirectory()) return [path];
  return readdirSync(path)
    .sort()
    .flatMap((f) => files(join(path, f)));
}

function alive(pid: number): boolean {
  try {
    process.kill(pid, 0);
    return true;
  } catch (err) {
    return (err as NodeJS.ErrnoException).code === 'EPERM';
  }
}

/**
 * A lock folder whose builder died: its pid is gone, or it never wrote one and is over 30 s old
 * (killed right after taking it). A lock released while being judged is not abandoned.
 */
export function abandoned(lock: string): boolean {
  try {
    const pid = Number(readFileSync(join(lock, 'pid'), 'utf8'));
    return pid > 0 && !alive(pid);
  } catch {
    try {
      return Date.now() - statSync(lock).mtimeMs > 30_000;
    } catch {
      return false;
    }
  }
}
