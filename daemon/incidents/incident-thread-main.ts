/**
 * The incident thread: the daemon's IncidentLibrary, answering one request
 * at a time; what it logs goes to the main thread's logger.
 */
import { parentPort, workerData } from 'node:worker_threads';
import { IncidentFileError } from '../../core/incident';
import type { Logger, LogLevel } from '../../core/log/logger';
import { loadSqliteBinding } from '../../core/store/schema';
import { IncidentLibrary } from './incident-library';
import type { IncidentAnswer, IncidentRequest, IncidentThreadData } from './incident-protocol';

loadSqliteBinding();
const post = (answer: IncidentAnswer) => parentPort!.postMessage(answer);
const line =
  (level: LogLevel) =>
  (msg: string, fields?: Record<string, unknown>): void =>
    post({ id: 0, log: level, msg, fields });
const log: Logger = {
  debug: line('debug'),
  info: line('info'),
  warn: line('warn'),
  error: line('error'),
  child: () => log,
};

const library = new IncidentLibrary((workerData as IncidentThreadData).dataDir, log);

parentPort!.on('message', (request: IncidentRequest) => {
  try {
    const entry =
      request.op === 'upload'
        ? library.upload(
            Buffer.from(request.bytes.buffer, request.bytes.byteOffset, request.bytes.byteLength),
          )
        : undefined;
    post({ id: request.id, ok: true, listing: library.listing(), entry });
  } catch (err) {
    const error = err as Error & { code?: string };
    post({
      id: request.id,
      ok: false,
      error: {
        code: err instanceof IncidentFileError ? err.code : undefined,
        file: err instanceof IncidentFileError ? err.file : undefined,
        message: error.message,
      },
    });
  }
});
