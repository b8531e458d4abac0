// The renderer's own Vite build: `vite build --config renderer/vite.config.ts` -> renderer/dist/.
// base './' so the Electron shell can load dist/index.html from file:// and host mode can serve it
// from any path.
import { defineConfig } from 'vite';
import react from '@vitejs/plugin-react';
import { fileURLToPath } from 'node:url';

const root = fileURLToPath(new URL('.', import.meta.url));

export default defineConfig({
  root,
  base: './',
  plugins: [react()],
  build: {
    outDir: 'dist',
    emptyOutDir: true,
    target: 'es2022',
    sourcemap: true,
    chunkSizeWarningLimit: 1500,
  },
  server: { host: '127.0.0.1' },
});
