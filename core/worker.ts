/**
 * Starts a worker thread from a module next to the caller, the same way for
 * every thread kreplay runs (the store's writer, the replay clock): the
 * compiled .js from dist/, or, when the caller itself runs from the
 * TypeScript sources (ts-jest), that module's .ts compiled as it loads. So
 * a test runs the thread code it tests, never a stale build.
 */
import { existsSync } from 'node:fs';
import { Worker, type WorkerOptions } from 'node:worker_threads';

/* Runs in the worker: compile each .ts module on require (type information is not needed to emit). */
function requireTypeScript(typescriptPath: string, entry: string): void {
  /* eslint-disable @typescript-eslint/no-require-imports */
  const ts = require(typescriptPath) as typeof import('typescript');
  const fs = require('node:fs') as typeof import('node:fs');
  const Module = require('node:module') as { _extensions: Record<string, unknown> };
  Module._extensions['.ts'] = (module: { _compile(code: string, file: string): void }, file: string) => {
    const { outputText } = ts.transpileModule(fs.readFileSync(file, 'utf8'), {
      fileName: file,
      compilerOptions: {
        module: ts.ModuleKind.CommonJS,
        target: ts.ScriptTarget.ES2022,
        esModuleInterop: true,
        inlineSourceMap: true,
      },
    });
    module._compile(outputText, file);
  };
  require(entry);
  /* eslint-enable @typescript-eslint/no-require-imports */
}

/** `entry` is the module's path without its extension, e.g. join(__dirname, 'writer-thread'). */
export function startWorker(entry: string, options: WorkerOptions = {}): Worker {
  if (existsSync(`${entry}.js`)) return new Worker(`${entry}.js`, options);
  if (!existsSync(`${entry}.ts`)) throw new Error(`no worker module ${entry}.js or .ts`);
  const source = `(${requireTypeScript.toString()})(${JSON.stringify(require.resolve('typescript'))}, ${JSON.stringify(`${entry}.ts`)})`;
  return new Worker(source, { ...options, eval: true });
}
