/**
 * The main thread's half of the command ring: commands wait in a backlog,
 * move into the ring at the end of the task that queued them (or at once
 * when one must be seen done), and wake the clock thread. What a command
 * needs beside its slot (a lane's buffer, a watcher's text) goes on the port
 * ahead of it.
 */
import type { MessagePort } from 'node:worker_threads';
import { ClockError } from './clock-error';
import {
  CONTROL,
  encodeCommand,
  type ClockCommand,
  type ClockPortMessage,
  type SlotRing,
} from './clock-wire';

/** How long the main thread waits for the clock thread to take a command it must see done. */
const SYNC_TIMEOUT_MS = 2000;

export class CommandQueue {
  /** commands that did not fit in the ring yet, and where those not yet in it start */
  private backlog: number[] = [];
  private backlogHead = 0;
  private flushQueued = false;
  private lastSync = 0;
  /** the clock thread's failure: no command is queued after it */
  failure: Error | null = null;

  constructor(
    private readonly control: Int32Array,
    private readonly ring: SlotRing,
    private readonly port: MessagePort,
  ) {}

  /** A message the thread reads when a command queued after it says so. */
  post(message: ClockPortMessage): void {
    this.port.postMessage(message);
  }

  /** Queues a command of lane `lane`; the thread gets it when this task is done (or at flush() or settle()). */
  queue(lane: number, generation: number, command: ClockCommand): void {
    if (this.failure) throw new Error(`the replay clock failed: ${this.failure.message}`);
    this.append(lane, generation, command);
    if (!this.flushQueued) {
      this.flushQueued = true;
      queueMicrotask(() => this.flush());
    }
  }

  private append(lane: number, generation: number, command: ClockCommand): void {
    encodeCommand(this.backlog, this.backlog.length, lane, generation, command);
  }

  /** Moves the backlog into the ring, as far as it fits, and wakes the thread. */
  flush(): void {
    this.flushQueued = false;
    const taken = this.ring.push(this.backlog, this.backlogHead);
    if (taken > this.backlogHead) {
      if (taken === this.backlog.length) {
        this.backlog = [];
        this.backlogHead = 0;
      } else this.backlogHead = taken;
      this.wake();
    }
    // the ring is full: the thread drains it as it wakes, so try the rest a little later (not in a busy loop)
    if (this.backlogHead < this.backlog.length && !this.flushQueued) {
      this.flushQueued = true;
      setTimeout(() => this.flush(), 1);
    }
  }

  /** Wakes the clock thread to look at its commands (and to report what it counted meanwhile). */
  wake(): void {
    Atomics.add(this.control, CONTROL.wake, 1);
    Atomics.notify(this.control, CONTROL.wake);
  }

  /**
   * Returns once the thread has done every command queued so far. Blocks the
   * main thread for as long as the clock thread takes to look (microseconds
   * under SCHED_FIFO).
   */
  settle(): void {
    const seq = ++this.lastSync;
    this.append(0, 0, { kind: 'sync', seq });
    // performance.now(): a wall clock stepped on failed a live thread at once, stepped back hung here for the step
    const giveUp = performance.now() + SYNC_TIMEOUT_MS;
    for (;;) {
      this.flush();
      const ack = Atomics.load(this.control, CONTROL.ack);
      if (((ack - seq) | 0) >= 0) return;
      if (this.failure || performance.now() > giveUp)
        throw new ClockError(
          'E_CLOCK_STALLED',
          `the replay clock thread did not answer within ${SYNC_TIMEOUT_MS} ms${this.failure ? `: ${this.failure.message}` : ''}`,
        );
      Atomics.wait(this.control, CONTROL.ack, ack, 1);
    }
  }

  /** The last command: the thread ends once it has done the ones before. */
  stop(): void {
    this.append(0, 0, { kind: 'stop' });
    this.flush();
    this.port.close();
  }
}
