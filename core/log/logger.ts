/**
 * The leveled logger everyone imports. Two formats: `text`, one line per
 * message with fields as key=value (for a person at a terminal), and `json`,
 * one JSON object per line through pino (for journald, Loki, Elastic …).
 */
import pino from 'pino';

import type { LogFormat, LogLevel } from './log-levels';

export { LOG_FORMATS, LOG_LEVELS, type LogFormat, type LogLevel } from './log-levels';

const RANK: Record<LogLevel, number> = { debug: 10, info: 20, warn: 30, error: 40 };

export interface Logger {
  debug(msg: string, fields?: Record<string, unknown>): void;
  info(msg: string, fields?: Record<string, unknown>): void;
  warn(msg: string, fields?: Record<string, unknown>): void;
  error(msg: string, fields?: Record<string, unknown>): void;
  child(component: string): Logger;
}

export interface LoggerOptions {
  level?: LogLevel;
  /** default: json unless stderr is a terminal */
  format?: LogFormat;
  component?: string;
  /** where lines go (without their newline); default stderr */
  write?: (line: string) => void;
}

/** What a process's logs look like when nobody said: text for a person at a terminal, else JSON lines. */
export function defaultLogFormat(): LogFormat {
  return process.stderr.isTTY ? 'text' : 'json';
}

function formatFields(fields: Record<string, unknown> | undefined): string {
  if (!fields) return '';
  let out = '';
  for (const [k, v] of Object.entries(fields)) {
    const text = typeof v === 'string' ? (/[\s="]/.test(v) ? JSON.stringify(v) : v) : String(v);
    out += ` ${k}=${text}`;
  }
  return out;
}

const stderrLine = (line: string) => process.stderr.write(line + '\n');
const childName = (parent: string | undefined, component: string) =>
  parent ? `${parent}/${component}` : component;

function textLogger(level: LogLevel, write: (line: string) => void, component?: string): Logger {
  const prefix = component ? `[${component}] ` : '';
  const emit = (at: LogLevel) => (msg: string, fields?: Record<string, unknown>) => {
    if (RANK[at] < RANK[level]) return;
    write(`${new Date().toISOString()} ${at.toUpperCase().padEnd(5)} ${prefix}${msg}${formatFields(fields)}`);
  };
  return {
    debug: emit('debug'),
    info: emit('info'),
    warn: emit('warn'),
    error: emit('error'),
    child: (name) => textLogger(level, write, childName(component, name)),
  };
}

function jsonLogger(root: pino.Logger, component?: string): Logger {
  // children are made from the root: pino would repeat a `component` key a parent already bound
  const out = component === undefined ? root : root.child({ component });
  return {
    debug: (msg, fields) => out.debug(fields ?? {}, msg),
    info: (msg, fields) => out.info(fields ?? {}, msg),
    warn: (msg, fields) => out.warn(fields ?? {}, msg),
    error: (msg, fields) => out.error(fields ?? {}, msg),
    child: (name) => jsonLogger(root, childName(component, name)),
  };
}

export function createLogger(options: LoggerOptions = {}): Logger {
  const level = options.level ?? 'info';
  const format = options.format ?? defaultLogFormat();
  const write = options.write ?? stderrLine;
  if (format === 'text') return textLogger(level, write, options.component);
  const root = pino(
    {
      level,
      base: undefined,
      timestamp: pino.stdTimeFunctions.isoTime,
      formatters: { level: (label) => ({ level: label }) },
    },
    // synchronous: a line logged just before the process exits is not lost
    { write: (text: string) => write(text.endsWith('\n') ? text.slice(0, -1) : text) },
  );
  return jsonLogger(root, options.component);
}

/** For tests and library use where nothing should be printed. */
export const silentLogger: Logger = {
  debug: () => undefined,
  info: () => undefined,
  warn: () => undefined,
  error: () => undefined,
  child: () => silentLogger,
};
