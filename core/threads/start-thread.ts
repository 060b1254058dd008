/**
 * Starts a worker thread from a module beside its owner, the same way for
 * every thread (the store writer, the replay clock): built, it runs the .js
 * file in dist/; from the TypeScript sources (ts-jest) it runs the .ts file
 * itself, transpiled as it loads, so a test never runs a stale build.
 */
import { existsSync } from 'node:fs';
import { join } from 'node:path';
import { Worker, type WorkerOptions } from 'node:worker_threads';
import { KreplayError } from '../errors';

/* Loads .ts modules in the thread with the checkout's own TypeScript (a dev dependency, as ts-jest is). */
function sourceLoader(entry: string): string {
  return `
const Module = require('node:module');
const fs = require('node:fs');
const ts = require(${JSON.stringify(require.resolve('typescript'))});
const options = { module: ts.ModuleKind.CommonJS, target: ts.ScriptTarget.ES2022, esModuleInterop: true };
Module._extensions['.ts'] = (module, filename) => {
  const source = fs.readFileSync(filename, 'utf8');
  module._compile(ts.transpileModule(source, { fileName: filename, compilerOptions: options }).outputText, filename);
};
require(${JSON.stringify(entry)});
`;
}

/** `dir` is the owner's __dirname and `name` the thread module's name without extension. */
export function startThread(dir: string, name: string, options: WorkerOptions = {}): Worker {
  const built = join(dir, `${name}.js`);
  if (existsSync(built)) return new Worker(built, options);
  const source = join(dir, `${name}.ts`);
  if (!existsSync(source))
    throw new KreplayError('E_THREAD_MODULE', `no ${built} nor ${source}: run \`make build\``);
  return new Worker(sourceLoader(source), { ...options, eval: true });
}
