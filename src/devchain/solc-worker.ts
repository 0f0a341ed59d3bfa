import { Worker } from 'node:worker_threads';

// solc-js compiles synchronously for seconds; a worker keeps the event loop free meanwhile (anvil
// startup, HTTP servers). The worker body is plain JS evaluated from a string because a worker
// does not inherit the tsx/vitest loaders that would let it import a .ts file.
const WORKER_SOURCE = `
const { parentPort, workerData } = require('node:worker_threads');
const { createRequire } = require('node:module');
const fs = require('node:fs');
const solc = require(workerData.solcPath);
const resolveFrom = createRequire(workerData.resolveFrom);
function findImports(importPath) {
  try {
    return { contents: fs.readFileSync(resolveFrom.resolve(importPath), 'utf8') };
  } catch (err) {
    return { error: 'cannot resolve import ' + importPath + ': ' + err.message };
  }
}
const output = solc.compile(workerData.input, { import: findImports });
parentPort.postMessage({ version: solc.version(), output });
`;

export interface SolcRun {
  version: string;
  output: string;
}

/**
 * Runs solc-js standard JSON in a worker thread.
 * @param resolveFrom a file path whose node_modules resolution is used for non-relative imports.
 */
export function runSolc(solcPath: string, input: string, resolveFrom: string): Promise<SolcRun> {
  return new Promise((resolve, reject) => {
    const worker = new Worker(WORKER_SOURCE, { eval: true, workerData: { solcPath, input, resolveFrom } });
    worker.once('message', (msg: SolcRun) => {
      resolve(msg);
      void worker.terminate();
    });
    worker.once('error', reject);
    worker.once('exit', (code) => {
      if (code !== 0) reject(new Error(`solc worker exited with code ${code}`));
    });
  });
}
