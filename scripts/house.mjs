// The house drawing's figures (docs/architecture.md#measured): import circles in src/ (type imports and
// dynamic import() included), imports that break the floors' rules, files over 500 lines, folders over 24
// files, and which files write each table. `node scripts/house.mjs`. The rules are checked in `npm test`
// by test/layering.test.ts.
import { brokenRules, circles, crowdedFolders, importGraph, longFiles, readSources, tableWriters } from './house-graph.mjs';

const files = readSources();
const edges = importGraph(files);
const cs = circles(edges);
console.log(`import circles: ${cs.length}`);
for (const c of cs) console.log(`  ${c.join(' <-> ')}`);
const broken = brokenRules(edges);
console.log(`imports against the floors' rules: ${broken.length}`);
for (const b of broken) console.log(`  ${b}`);
const long = longFiles(files);
console.log(`files over 500 lines: ${long.length}`);
for (const [p, n] of long) console.log(`  ${p} (${n})`);
const crowded = crowdedFolders(files);
console.log(`folders over 24 source files: ${crowded.length}`);
for (const [d, n] of crowded) console.log(`  ${d}/ (${n})`);
console.log('tables written from more than one file:');
for (const [t, ws] of [...tableWriters(files)].sort()) if (ws.size > 1) console.log(`  ${t}: ${[...ws].join(', ')}`);
