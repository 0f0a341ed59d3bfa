// The house's rules as a test (docs/architecture.md#the-house): the import graph of src/ (type imports,
// re-exports and dynamic import() included) read as scripts/house.mjs reads it. A rule broken by a
// change fails here with the file and the import that broke it. The lists of tolerated exceptions may
// only shrink: an exception that no longer occurs fails too, so the list is kept true.
import { describe, expect, it } from 'vitest';
// @ts-expect-error: a plain .mjs script module, without type declarations
import { brokenRules, circles, crowdedFolders, importGraph, longFiles, readSources, tableWriters, topOf } from '../scripts/house-graph.mjs';

type Files = Map<string, string>;
const files = readSources() as Files;
const edges = importGraph(files) as Map<string, Set<string>>;

/** Files over 500 lines, to be split (#59); none may join them. */
const LONG_FILES: string[] = [];
/** Folders over 24 source files: none. */
const CROWDED: string[] = [];
/** Relayer tables written from more than one file: none. */
const SHARED_RELAYER_TABLES: Record<string, string[]> = {};

/**
 * The head is read through the shared ChainHead (chain.head), so its stale-node handling and its one
 * read per block time reach every reader. Asking the node for it directly is for src/chain/ itself, the
 * dev chain and doctor's probe.
 */
const HEAD_READ = /\.getBlockNumber\(|\.getBlock\(\s*(?:\)|\{\s*blockTag:\s*['"]latest['"])|['"]eth_blockNumber['"]|['"]eth_getBlockByNumber['"]\s*,\s*params:\s*\[\s*['"]latest['"]/;
const MAY_READ_THE_HEAD = (file: string) => file.startsWith('chain/') || file.startsWith('devchain/') || file === 'cli/doctor.ts';

describe('the house', () => {
  it('has no import circle, dynamic imports counted', () => {
    expect(circles(edges)).toEqual([]);
  });

  it('keeps the floors: the ground imports nothing above it, domains meet through front doors, faces do not import each other', () => {
    const broken = brokenRules(edges) as string[];
    expect(broken).toEqual([]);
  });

  it('has each relayer table written from one file', () => {
    const relayerTables = new Map<string, string[]>();
    for (const [table, writers] of tableWriters(files) as Map<string, Set<string>>) {
      if ([...writers].some((w) => topOf(w) === 'relayer')) relayerTables.set(table, [...writers].sort());
    }
    const shared = Object.fromEntries([...relayerTables].filter(([, w]) => w.length > 1));
    expect(shared).toEqual(SHARED_RELAYER_TABLES);
  });

  it('grows no file over 500 lines and no folder over 24 files beyond the listed ones', () => {
    expect((longFiles(files) as Array<[string, number]>).map(([p]) => p).sort()).toEqual(LONG_FILES);
    expect((crowdedFolders(files) as Array<[string, number]>).map(([d]) => d).sort()).toEqual(CROWDED);
  });

  it('reads the head only through chain.head outside src/chain/, the dev chain and doctor', () => {
    const direct = [...files].filter(([f, text]) => !MAY_READ_THE_HEAD(f) && HEAD_READ.test(text)).map(([f]) => f);
    expect(direct).toEqual([]);
  });
});
