/**
 * The raw-SQLite baseline: one long-lived `sqlite3` CLI process per store
 * file, fed statements over a pipe. A statement's time is from writing it to
 * reading the end of its output, less the pipe's own round trip (measured
 * with an empty command), so neither process start-up nor the pipe counts.
 * `.timer on` alone would not do: its wall clock has millisecond resolution.
 */
import { spawn, type ChildProcessWithoutNullStreams } from 'node:child_process';

const DONE = '@@kreplay-bench-done@@';

export class SqliteCli {
  private output = '';
  private waiter: (() => void) | null = null;
  private roundTripNs = 0;

  private constructor(private readonly child: ChildProcessWithoutNullStreams) {
    child.stdout.setEncoding('utf8');
    child.stdout.on('data', (chunk: string) => {
      // keep only the tail: what matters is whether the sentinel arrived
      this.output = (this.output + chunk).slice(-DONE.length - 1);
      if (this.output.endsWith(`${DONE}\n`) && this.waiter) {
        const wake = this.waiter;
        this.waiter = null;
        wake();
      }
    });
  }

  static async open(path: string): Promise<SqliteCli> {
    const cli = new SqliteCli(spawn('sqlite3', ['-readonly', '-batch', path]));
    const trips: number[] = [];
    for (let i = 0; i < 200; i++) trips.push(await cli.roundTrip(''));
    cli.roundTripNs = trips.sort((a, b) => a - b)[trips.length >> 1]!;
    return cli;
  }

  private roundTrip(sql: string): Promise<number> {
    return new Promise((resolve) => {
      const started = process.hrtime.bigint();
      this.output = '';
      this.waiter = () => resolve(Number(process.hrtime.bigint() - started));
      this.child.stdin.write(`${sql}\n.print ${DONE}\n`);
    });
  }

  /** Nanoseconds the CLI took to run `sql` and print its rows. */
  async time(sql: string): Promise<number> {
    return Math.max(0, (await this.roundTrip(sql)) - this.roundTripNs);
  }

  close(): void {
    this.child.stdin.end();
  }
}

/** A statement with its named parameters written in as literals, as the CLI needs it. */
export function inlineParams(sql: string, params: Record<string, bigint | number | string | null>): string {
  return `${sql.replace(/@(\w+)/g, (_, name: string) => {
    const value = params[name];
    if (value === undefined) throw new Error(`no value for @${name}`);
    if (value === null) return 'NULL';
    return typeof value === 'string' ? `'${value.replace(/'/g, "''")}'` : String(value);
  })};`;
}
