// prepack / postpack: the packed package.json leaves out the checkout-only `prepare` script. npm lists
// a dependency's `prepare` among its install scripts and warns about it on every install of the
// tarball ("install scripts not yet covered by allowScripts"), though it points at scripts/prepare.mjs,
// which the package does not ship and which only builds the console page in a checkout.
// `strip` saves package.json aside and writes it without `prepare`; `restore` puts it back.
import { existsSync, readFileSync, renameSync, writeFileSync } from 'node:fs';

const file = new URL('../package.json', import.meta.url);
const saved = new URL('../.package.json.prepack', import.meta.url);
const mode = process.argv[2];

if (mode === 'strip') {
  // A pack that failed before its postpack left the original aside: put it back first.
  if (existsSync(saved)) renameSync(saved, file);
  const text = readFileSync(file, 'utf8');
  writeFileSync(saved, text);
  const pkg = JSON.parse(text);
  delete pkg.scripts.prepare;
  writeFileSync(file, `${JSON.stringify(pkg, null, 2)}\n`);
} else if (mode === 'restore') {
  if (existsSync(saved)) renameSync(saved, file);
} else {
  console.error('usage: node scripts/pack-manifest.mjs strip|restore');
  process.exit(2);
}
