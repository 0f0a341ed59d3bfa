// One process at a time on a PGlite folder. PGlite has no lock of its own: a second process (say
// `metarelay projects create` while `npm start` runs) opened the folder, wrote to its own copy of
// the pages, and the server never saw the project; two writers can corrupt the folder outright.
//
// The lock is a file in the folder, created with O_EXCL and holding the owner's pid. A lock whose
// pid is no longer alive (the owner was SIGKILLed) is stale and taken over. Two processes taking
// over the same stale lock at the same instant could both win; that needs a crash and two starts
// within milliseconds, and Node has no flock() to close the window.

import { closeSync, openSync, readFileSync, unlinkSync, writeSync } from 'node:fs';
import { join } from 'node:path';

export const LOCK_FILE = 'metarelay.lock';

export class FolderInUseError extends Error {
  constructor(
    readonly folder: string,
    readonly pid: number,
  ) {
    super(
      `the PGlite database folder ${folder} is in use by process ${pid}: PGlite allows one process at a time. ` +
        `Stop that process first, or make the change through the running server instead: its console ` +
        `(<base>/console/) or the console's admin API (POST <base>/rpc/Console/<Method>, e.g. CreateProject, ` +
        `with an admin token). If process ${pid} is not metarelay, delete ${join(folder, LOCK_FILE)}.`,
    );
    this.name = 'FolderInUseError';
  }
}

export interface FolderLock {
  release(): void;
}

/** Locks held by this process, released when it exits however it exits (short of SIGKILL). */
const held = new Set<string>();
let exitHookInstalled = false;

function releaseFile(path: string): void {
  held.delete(path);
  try {
    // Only our own lock: a stale-lock takeover by another process must not be undone by us.
    if (ownerOf(path) === process.pid) unlinkSync(path);
  } catch {
    // Already gone.
  }
}

function ownerOf(path: string): number | null {
  const pid = Number.parseInt(readFileSync(path, 'utf8').trim(), 10);
  return Number.isSafeInteger(pid) && pid > 0 ? pid : null;
}

function isAlive(pid: number): boolean {
  try {
    process.kill(pid, 0);
    return true;
  } catch (err) {
    // EPERM: it exists but belongs to another user.
    return (err as NodeJS.ErrnoException).code === 'EPERM';
  }
}

/** Takes the folder's lock, or throws FolderInUseError naming the process that holds it. */
export function lockFolder(folder: string): FolderLock {
  const path = join(folder, LOCK_FILE);
  for (let attempt = 0; ; attempt++) {
    let fd: number;
    try {
      fd = openSync(path, 'wx');
    } catch (err) {
      if ((err as NodeJS.ErrnoException).code !== 'EEXIST' || attempt >= 3) throw err;
      let owner: number | null;
      try {
        owner = ownerOf(path);
      } catch {
        continue; // released between our open and our read
      }
      // An empty or garbled file is a lock whose writer died between creating and writing it.
      if (owner !== null && isAlive(owner)) throw new FolderInUseError(folder, owner);
      try {
        unlinkSync(path);
      } catch {
        // Another process removed the stale lock first; the next open decides.
      }
      continue;
    }
    try {
      writeSync(fd, `${process.pid}\n`);
    } finally {
      closeSync(fd);
    }
    break;
  }
  held.add(path);
  if (!exitHookInstalled) {
    exitHookInstalled = true;
    process.on('exit', () => {
      for (const p of [...held]) releaseFile(p);
    });
  }
  let released = false;
  return {
    release() {
      if (released) return;
      released = true;
      releaseFile(path);
    },
  };
}
