/** Threads run the code beside their owner: the build's .js, else the .ts source itself (never a stale build). */
import { mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { once } from 'node:events';
import { startThread } from '../../core/threads/start-thread';

async function answer(dir: string, name: string): Promise<unknown> {
  const worker = startThread(dir, name, { workerData: 20 });
  const [message] = (await once(worker, 'message')) as [unknown];
  await worker.terminate();
  return message;
}

describe('startThread', () => {
  const dir = mkdtempSync(join(tmpdir(), 'kreplay-thread-'));
  const source = (body: string) =>
    `import { parentPort, workerData } from 'node:worker_threads';\nimport { add } from './helper';\n${body}`;
  writeFileSync(join(dir, 'helper.ts'), 'export const add = (a: number, b: number): number => a + b;\n');

  it('runs a TypeScript module, with its own imports, when nothing is built', async () => {
    writeFileSync(
      join(dir, 'only-source.ts'),
      source('parentPort!.postMessage(add(workerData as number, 1));\n'),
    );
    expect(await answer(dir, 'only-source')).toBe(21);
  });

  it('runs a source changed since its last start as it is now, and an unchanged one without loading TypeScript', async () => {
    const file = join(dir, 'changing.ts');
    // whether the thread's loader had to load TypeScript to run it
    const reply = (value: string) =>
      source(
        `parentPort!.postMessage([${value}, Object.keys(require.cache).some((f) => f.endsWith('/typescript/lib/typescript.js'))]);\n`,
      );
    writeFileSync(file, reply('add(1, 1)'));
    await answer(dir, 'changing');
    expect(await answer(dir, 'changing')).toEqual([2, false]);
    writeFileSync(file, reply('add(2, 2)'));
    expect(await answer(dir, 'changing')).toEqual([4, true]);
    expect(await answer(dir, 'changing')).toEqual([4, false]);
  });

  it('runs the built .js when there is one', async () => {
    writeFileSync(join(dir, 'both.ts'), source('parentPort!.postMessage("source");\n'));
    writeFileSync(join(dir, 'both.js'), 'require("node:worker_threads").parentPort.postMessage("built");\n');
    expect(await answer(dir, 'both')).toBe('built');
  });

  it('names the missing module', () => {
    expect(() => startThread(dir, 'nothing')).toThrow(expect.objectContaining({ code: 'E_THREAD_MODULE' }));
  });
});
