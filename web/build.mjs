// Bundles the page with esbuild into dist/web: content-hashed assets (cached for good) and an index.html naming them.
import { build } from 'esbuild';
import { mkdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { basename, dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';

const here = dirname(fileURLToPath(import.meta.url));
const out = join(here, '..', 'dist', 'web');
rmSync(out, { recursive: true, force: true });
mkdirSync(join(out, 'assets'), { recursive: true });
const result = await build({
  entryPoints: [join(here, 'src', 'main.ts')],
  bundle: true,
  minify: true,
  sourcemap: 'linked',
  format: 'esm',
  target: 'es2022',
  entryNames: '[name]-[hash]',
  outdir: join(out, 'assets'),
  metafile: true,
  logLevel: 'warning',
});
const outputs = Object.keys(result.metafile.outputs).map((file) => basename(file));
const script = outputs.find((f) => f.endsWith('.js'));
const style = outputs.find((f) => f.endsWith('.css'));
const html = readFileSync(join(here, 'index.html'), 'utf8')
  .replace('%SCRIPT%', `/assets/${script}`)
  .replace('%STYLE%', `/assets/${style}`);
writeFileSync(join(out, 'index.html'), html);
