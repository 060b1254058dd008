/**
 * A list of doubles in one Float64Array that doubles as it fills and keeps
 * its room when cleared: what the clock thread collects per release, so
 * that a dense replay allocates nothing per look (a plain array emptied by
 * `length = 0` gives up its storage, and regrows it on the next push, and
 * the collections that follow stop the clock thread, their helpers running
 * at an ordinary priority).
 */
/** Doubles read by index. */
export interface Floats {
  readonly length: number;
  get(i: number): number;
}

export class FloatList implements Floats {
  private data: Float64Array;
  length = 0;

  constructor(capacity = 1024) {
    this.data = new Float64Array(capacity);
  }

  push(value: number): void {
    if (this.length === this.data.length) {
      const grown = new Float64Array(this.data.length * 2);
      grown.set(this.data);
      this.data = grown;
    }
    this.data[this.length++] = value;
  }

  get(i: number): number {
    return this.data[i]!;
  }

  clear(): void {
    this.length = 0;
  }

  /** Drops the first `count` values. */
  dropFront(count: number): void {
    this.data.copyWithin(0, count, this.length);
    this.length -= count;
  }
}
