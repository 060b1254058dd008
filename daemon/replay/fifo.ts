/**
 * A first-in first-out queue with O(1) shift: Array.prototype.shift moves
 * every element, which made releasing each event of a dense replay cost as
 * much as the lookahead was long.
 */
export class Fifo<T> {
  private items: T[] = [];
  private head = 0;

  get length(): number {
    return this.items.length - this.head;
  }

  /** The `i`th item from the front. */
  at(i: number): T | undefined {
    return this.items[this.head + i];
  }

  push(item: T): void {
    this.items.push(item);
  }

  shift(): T | undefined {
    if (this.head >= this.items.length) return undefined;
    const item = this.items[this.head]!;
    this.head++;
    // drop the consumed front now and then, in one move
    if (this.head >= 1024 && this.head * 2 >= this.items.length) {
      this.items = this.items.slice(this.head);
      this.head = 0;
    }
    return item;
  }

  clear(): void {
    this.items = [];
    this.head = 0;
  }
}
