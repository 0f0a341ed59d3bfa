// npm install / npm ci run this: builds the console page when its build tools (dev dependencies)
// are installed. A production install without them (npm ci --omit=dev) still succeeds; metarelay
// then answers /console with a note to run `npm run build` where the dev dependencies are.
import { spawnSync } from 'node:child_process';
import { createRequire } from 'node:module';

const require = createRequire(import.meta.url);
try {
  require.resolve('vite/package.json');
} catch {
  console.log('metarelay: console page not built (vite, a dev dependency, is not installed); run `npm run build` with dev dependencies');
  process.exit(0);
}
const r = spawnSync('npm', ['run', 'build:console'], { stdio: 'inherit' });
process.exit(r.status ?? 1);
