/**
 * The OTLP export's thread: the export loop (agent/otlp/otlp-loop.ts), so
 * reading the store, encoding, compressing and sending never take the
 * agent's main thread, which decodes the capture. The main thread only
 * learns the progress, and asks for the stop.
 */
import { parentPort, workerData } from 'node:worker_threads';
import { OtlpLoop } from './otlp-loop';
import type { OtlpProgress } from './otlp-progress';
import type { OtlpThreadData, ToOtlpThread } from './otlp-exporter';

const data = workerData as OtlpThreadData;
const port = parentPort!;
const loop = new OtlpLoop(
  data.storePath,
  data.target,
  data.cursor,
  (progress: OtlpProgress) => port.postMessage({ ...progress }),
  data.options,
);
port.on('message', (message: ToOtlpThread) => {
  // after the last progress message: the owner's stop() resolves on it, then the thread ends
  void loop.stop(message.flushMs).then(() => port.close());
});
loop.start();
