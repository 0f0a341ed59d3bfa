// Blob store in a local folder: the default, works offline. Each blob is written to a temporary
// file and renamed into place, so a crash never leaves a partial blob under its real name.

import { randomBytes } from 'node:crypto';
import { createReadStream } from 'node:fs';
import { mkdir, open, readdir, readFile, rename, rm, stat, writeFile } from 'node:fs/promises';
import { dirname, join, relative, sep } from 'node:path';
import type { BlobStore } from './blob-store.ts';

function isMissing(err: unknown): boolean {
  return (err as NodeJS.ErrnoException)?.code === 'ENOENT';
}

export function folderBlobStore(root: string): BlobStore {
  // Keys are built by blob-store.ts from hex digests and rendition names; join() keeps them under root.
  const pathOf = (key: string) => join(root, ...key.split('/'));

  async function walk(dir: string, out: string[]): Promise<void> {
    let entries;
    try {
      entries = await readdir(dir, { withFileTypes: true });
    } catch (err) {
      if (isMissing(err)) return;
      throw err;
    }
    for (const e of entries) {
      const p = join(dir, e.name);
      if (e.isDirectory()) await walk(p, out);
      else if (!e.name.startsWith('.tmp-')) out.push(relative(root, p).split(sep).join('/'));
    }
  }

  return {
    kind: 'folder',
    async put(key, bytes) {
      const path = pathOf(key);
      await mkdir(dirname(path), { recursive: true });
      const tmp = join(dirname(path), `.tmp-${randomBytes(6).toString('hex')}`);
      await writeFile(tmp, bytes);
      await rename(tmp, path);
    },
    async get(key) {
      try {
        return await readFile(pathOf(key));
      } catch (err) {
        if (isMissing(err)) return undefined;
        throw err;
      }
    },
    async getRange(key, start, end) {
      const fh = await openIfThere(pathOf(key));
      if (!fh) return undefined;
      try {
        const buf = Buffer.alloc(end - start + 1);
        const { bytesRead } = await fh.read(buf, 0, buf.length, start);
        return buf.subarray(0, bytesRead);
      } finally {
        await fh.close();
      }
    },
    async stream(key, range) {
      // Opened before it is handed out, so a missing blob is an answer, not a stream error.
      const fh = await openIfThere(pathOf(key));
      if (!fh) return undefined;
      return createReadStream('', { fd: fh, autoClose: true, ...(range ? { start: range.start, end: range.end } : {}) });
    },
    async size(key) {
      try {
        return (await stat(pathOf(key))).size;
      } catch (err) {
        if (isMissing(err)) return undefined;
        throw err;
      }
    },
    async delete(key) {
      await rm(pathOf(key), { force: true });
      if (key.startsWith('o/')) await rm(pathOf(`r/${key.slice(2)}`), { recursive: true, force: true });
    },
    async list(prefix) {
      const out: string[] = [];
      await walk(root, out);
      return out.filter((k) => k.startsWith(prefix)).sort();
    },
    async entries(prefix) {
      const out: string[] = [];
      await walk(root, out);
      const keys = out.filter((k) => k.startsWith(prefix)).sort();
      const found: Array<{ key: string; modifiedAt: Date }> = [];
      for (const key of keys) {
        try {
          found.push({ key, modifiedAt: (await stat(pathOf(key))).mtime });
        } catch (err) {
          if (!isMissing(err)) throw err; // deleted since the walk
        }
      }
      return found;
    },
    close() {},
  };
}

/** The file opened for reading, or undefined when it does not exist. */
async function openIfThere(path: string) {
  try {
    return await open(path, 'r');
  } catch (err) {
    if (isMissing(err)) return undefined;
    throw err;
  }
}
