// Builds the console page into dist/console-page (dist/console holds the compiled src/console), which metarelay serves at /console (src/console/static.ts).
import { fileURLToPath } from 'node:url';
import { defineConfig } from 'vite';

export default defineConfig({
  root: fileURLToPath(new URL('.', import.meta.url)),
  base: '/console/',
  logLevel: 'warn',
  oxc: { jsx: { runtime: 'automatic', importSource: 'preact' } },
  build: {
    outDir: fileURLToPath(new URL('../dist/console-page', import.meta.url)),
    emptyOutDir: true,
    assetsDir: 'assets',
  },
});
