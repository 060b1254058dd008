/** The logger a command's --log-level and --log-format (log-options.ts) ask for. */
import { createLogger, type Logger } from '../core/log/logger';
import type { LogFlags } from './log-options';

export function loggerFromFlags(flags: LogFlags, component: string): Logger {
  return createLogger({ component, level: flags.logLevel, format: flags.logFormat });
}
