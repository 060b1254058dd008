/**
 * --log-level and --log-format, the same on every long-running command. The
 * logger is made by flag-logger.ts: a command's flags load no logger (and no
 * pino) until it runs.
 */
import { InvalidArgumentError, type Command } from 'commander';
import { LOG_FORMATS, LOG_LEVELS, type LogFormat, type LogLevel } from '../core/log/log-levels';

export interface LogFlags {
  logLevel: LogLevel;
  logFormat?: LogFormat;
}

function choice<T extends string>(flag: string, choices: readonly T[]) {
  return (value: string): T => {
    if (!(choices as readonly string[]).includes(value))
      throw new InvalidArgumentError(`${flag} must be one of ${choices.join(', ')}, got "${value}"`);
    return value as T;
  };
}

export function addLogOptions(command: Command): Command {
  return command
    .option(
      '--log-level <level>',
      `least level logged: ${LOG_LEVELS.join(', ')}`,
      choice('--log-level', LOG_LEVELS),
      'info',
    )
    .option(
      '--log-format <format>',
      'text (key=value lines) or json (one object per line); default: text on a terminal, else json',
      choice('--log-format', LOG_FORMATS),
    );
}
