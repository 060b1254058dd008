/**
 * Starts a worker thread from a module beside its owner, the same way for
 * every thread (the store writer, the replay clock): built, it runs the .js
 * file in dist/; from the TypeScript sources (ts-jest) it runs the .ts file
 * itself, transpiled as it loads, so a test never runs a stale build.
 */
import { existsSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { Worker, type WorkerOptions } from 'node:worker_threads';
import { KreplayError } from '../errors';

/*
 * Loads .ts modules in the thread with the checkout's own TypeScript (a dev dependency, as ts-jest is).
 * Each output is kept in node_modules/.cache under a hash of the TypeScript version, the file's path
 * and its text, so a thread of unchanged sources loads no TypeScript at all (loading and running it
 * took each thread 0.5–5 s, which every daemon a test started paid three times over); a changed
 * source gets a new hash: never a stale output.
 */
function sourceLoader(entry: string): string {
  const typescript = require.resolve('typescript');
  const cacheDir = join(dirname(dirname(dirname(typescript))), '.cache', 'kreplay-thread-ts');
  return `
const Module = require('node:module');
const fs = require('node:fs');
const { createHash } = require('node:crypto');
const { join } = require('node:path');
const cacheDir = ${JSON.stringify(cacheDir)};
const version = require(${JSON.stringify(join(dirname(dirname(typescript)), 'package.json'))}).version;
// what an output depends on beside the TypeScript version, the file and its text: the options below
const LAYOUT = 'commonjs es2022 esModuleInterop';
let ts;
Module._extensions['.ts'] = (module, filename) => {
  const source = fs.readFileSync(filename, 'utf8');
  const key = JSON.stringify([LAYOUT, version, filename]) + source;
  const cached = join(cacheDir, createHash('sha256').update(key).digest('hex') + '.js');
  let output;
  try {
    output = fs.readFileSync(cached, 'utf8');
  } catch {
    ts ??= require(${JSON.stringify(typescript)});
    const options = { module: ts.ModuleKind.CommonJS, target: ts.ScriptTarget.ES2022, esModuleInterop: true };
    output = ts.transpileModule(source, { fileName: filename, compilerOptions: options }).outputText;
    fs.mkdirSync(cacheDir, { recursive: true, mode: 0o755 });
    const partial = cached + '.' + process.pid + '.' + require('node:worker_threads').threadId;
    fs.writeFileSync(partial, output);
    fs.renameSync(partial, cached);
  }
  module._compile(output, filename);
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
