/** A child of `kreplay up`: its stderr passes through, its last lines are kept to say why it died. */
import { spawn, type ChildProcess } from 'node:child_process';
import { constants } from 'node:os';

const TAIL_LINES = 10;
const LINE_CHARS = 400;

export interface ChildExit {
  code: number | null;
  signal: NodeJS.Signals | null;
  /** the spawn itself failed */
  error?: Error;
}

export class SupervisedChild {
  readonly process: ChildProcess;
  readonly exited: Promise<ChildExit>;
  private readonly tail: string[] = [];
  private partial = '';

  constructor(
    readonly name: string,
    command: string,
    args: string[],
  ) {
    this.process = spawn(command, args, { stdio: ['ignore', 'inherit', 'pipe'] });
    this.process.stderr!.on('data', (chunk: Buffer) => {
      process.stderr.write(chunk);
      this.keep(chunk.toString());
    });
    this.exited = new Promise((resolve) => {
      this.process.once('error', (error) => resolve({ code: null, signal: null, error }));
      this.process.once('close', (code, signal) => resolve({ code, signal }));
    });
  }

  get running(): boolean {
    return this.process.exitCode === null && this.process.signalCode === null;
  }

  stop(signal: NodeJS.Signals = 'SIGTERM'): void {
    if (this.running) this.process.kill(signal);
  }

  /** The stderr lines it wrote last, oldest first. */
  lastLines(): string[] {
    return this.partial ? [...this.tail, this.partial].slice(-TAIL_LINES) : [...this.tail];
  }

  private keep(text: string): void {
    const lines = (this.partial + text).split('\n');
    this.partial = lines.pop()!;
    for (const line of lines) if (line.trim()) this.tail.push(line.slice(0, LINE_CHARS));
    this.tail.splice(0, Math.max(0, this.tail.length - TAIL_LINES));
  }
}

/** "exited with code 1", "was killed by SIGKILL", "could not start: …" */
export function describeExit(exit: ChildExit): string {
  if (exit.error) return `could not start: ${exit.error.message}`;
  if (exit.signal) return `was killed by ${exit.signal}`;
  return `exited with code ${exit.code}`;
}

/** The exit status a shell would report for it: the code, or 128 + the signal's number. */
export function exitStatus(exit: ChildExit): number {
  if (exit.signal) return 128 + (constants.signals[exit.signal] ?? 0);
  return exit.code ?? 1;
}
