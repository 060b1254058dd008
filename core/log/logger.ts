/** A small leveled logger: one line per message on stderr, fields as key=value. */
export type LogLevel = 'debug' | 'info' | 'warn' | 'error';
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
  component?: string;
  write?: (line: string) => void;
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

export function createLogger(options: LoggerOptions = {}): Logger {
  const level = options.level ?? 'info';
  const write = options.write ?? ((line: string) => process.stderr.write(line + '\n'));
  const prefix = options.component ? `[${options.component}] ` : '';
  const emit = (at: LogLevel) => (msg: string, fields?: Record<string, unknown>) => {
    if (RANK[at] < RANK[level]) return;
    write(`${new Date().toISOString()} ${at.toUpperCase().padEnd(5)} ${prefix}${msg}${formatFields(fields)}`);
  };
  return {
    debug: emit('debug'),
    info: emit('info'),
    warn: emit('warn'),
    error: emit('error'),
    child: (component) =>
      createLogger({
        level,
        write,
        component: options.component ? `${options.component}/${component}` : component,
      }),
  };
}

/** For tests and library use where nothing should be printed. */
export const silentLogger: Logger = {
  debug: () => undefined,
  info: () => undefined,
  warn: () => undefined,
  error: () => undefined,
  child: () => silentLogger,
};
