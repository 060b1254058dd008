/** A Logger that hands each line to the test: its level, message and fields. */
import type { Logger } from '../../core/log/logger';

export type LogLevel = 'debug' | 'info' | 'warn' | 'error';

export function recordingLogger(
  record: (level: LogLevel, msg: string, fields?: Record<string, unknown>) => void,
): Logger {
  const at = (level: LogLevel) => (msg: string, fields?: Record<string, unknown>) =>
    record(level, msg, fields);
  const log: Logger = {
    debug: at('debug'),
    info: at('info'),
    warn: at('warn'),
    error: at('error'),
    child: () => log,
  };
  return log;
}
