// Runs several CLI commands in one node process (test/support/cli.ts, runBatch): the built main() of
// each argv in turn, its console captured, and process.exitCode as the process would have exited with
// it. A node of its own per command is ~0.2 s of CPU before the command does anything (node, then the
// CLI's modules); the commands of one batch pay that once. Usage:
//   node cli-batch.mjs <path of dist/cli/main.js>   (the argvs as a JSON array on stdin; the results
//   as a JSON array of {code, stdout, stderr} on stdout)
import { readFileSync } from 'node:fs';
import { pathToFileURL } from 'node:url';
import { format } from 'node:util';

const { main } = await import(pathToFileURL(process.argv[2]).href);
const argvs = JSON.parse(readFileSync(0, 'utf8'));
const write = process.stdout.write.bind(process.stdout);
const results = [];
for (const argv of argvs) {
  const out = { stdout: '', stderr: '' };
  console.log = (...a) => void (out.stdout += `${format(...a)}\n`);
  console.error = (...a) => void (out.stderr += `${format(...a)}\n`);
  process.exitCode = undefined;
  // main() answers every error itself (a message and an exit code); one it lets through ends the batch.
  await main(argv);
  results.push({ code: process.exitCode ?? 0, ...out });
}
process.exitCode = 0;
write(JSON.stringify(results));
