/**
 * Progress of a long count on stderr: on a terminal a bar redrawn in place
 * (at most every 100 ms), otherwise a plain line every 10 s, so a log file
 * does not fill with redraws; and a last line when done.
 */
const WIDTH = 30;
const TTY_EVERY_MS = 100;
const LOG_EVERY_MS = 10_000;

/** Its times are performance.now()'s: a wall clock step neither stops the lines nor makes the rate and seconds negative. */
export class ProgressLine {
  private readonly started = performance.now();
  private shownAt = -Infinity;
  private readonly tty: boolean;

  constructor(
    private readonly out: NodeJS.WriteStream,
    private readonly what: string,
    private readonly total: number,
  ) {
    this.tty = out.isTTY === true;
  }

  private text(done: number, note: string): string {
    const share = this.total > 0 ? Math.min(1, done / this.total) : 1;
    const seconds = (performance.now() - this.started) / 1000;
    const rate = seconds > 0 ? done / seconds : 0;
    const eta = rate > 0 && done < this.total ? ` ETA ${Math.ceil((this.total - done) / rate)}s` : '';
    const filled = Math.round(share * WIDTH);
    const bar = this.tty ? `[${'#'.repeat(filled)}${'.'.repeat(WIDTH - filled)}] ` : '';
    return `${bar}${(share * 100).toFixed(1)}% ${done}/${this.total} events ${Math.round(rate)}/s${eta}${note ? ` ${note}` : ''}`;
  }

  update(done: number, note = ''): void {
    const now = performance.now();
    if (now - this.shownAt < (this.tty ? TTY_EVERY_MS : LOG_EVERY_MS)) return;
    this.shownAt = now;
    if (this.tty) this.out.write(`\r\x1b[K${this.what} ${this.text(done, note)}`);
    else this.out.write(`${this.what}: ${this.text(done, note)}\n`);
  }

  finish(summary: string): void {
    const seconds = ((performance.now() - this.started) / 1000).toFixed(1);
    this.out.write(`${this.tty ? '\r\x1b[K' : ''}${this.what}: ${summary} in ${seconds} s\n`);
  }
}
