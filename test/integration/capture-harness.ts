/** Shared by the capture-*.test.ts kernel tests: run a capture around some work and decode what it saw. */
import { spawn } from 'node:child_process';
import { silentLogger } from '../../core/log/logger';
import { startCapture, type Capture, type CaptureOptions } from '../../agent/capture';
import { captureSupport } from '../support/capture-support';
import { decodeRecords, type DecodedRecord } from '../support/decode-records';
import type { KernelCounterName } from '../../core/model';

const support = captureSupport();
if (!support.ok) {
  console.warn(`\n*** SKIPPING kernel capture tests: ${support.reason} ***\n`);
}

/** describe, or a loud skip on hosts that truly cannot run a capture. */
export const describeKernel = support.ok ? describe : describe.skip;

export interface CaptureResult<T> {
  records: DecodedRecord[];
  counters: Record<KernelCounterName, number>;
  value: T;
}

/** Starts a capture, runs work, stops, and decodes every record delivered, in delivery order. */
export async function captureAround<T>(
  options: CaptureOptions,
  work: (capture: Capture) => Promise<T> | T,
): Promise<CaptureResult<T>> {
  const batches: Buffer[] = [];
  // a batch is valid during the callback only
  const capture = startCapture(options, (batch) => batches.push(Buffer.from(batch)), silentLogger);
  let value: T;
  try {
    value = await work(capture);
  } finally {
    await capture.stop();
  }
  return { records: batches.flatMap(decodeRecords), counters: capture.counters(), value };
}

/** Runs `file` with `args` to its end; its pid once it exits 0, so a test can pick out its records. */
export function runToExit(file: string, args: string[]): Promise<number> {
  return new Promise((resolve, reject) => {
    const child = spawn(file, args, { stdio: 'ignore' });
    child.on('error', reject);
    child.on('exit', (code) =>
      code === 0 ? resolve(child.pid as number) : reject(new Error(`${file} exited ${code}`)),
    );
  });
}
