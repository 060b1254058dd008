/**
 * Watchers whose sockets the clock thread writes: each has the thread's
 * copy of its socket (a duplicated descriptor, closed here once the thread
 * says it closed it) and whom to tell. A lane's sockets API is a command in
 * order with the lane's deadlines.
 */
import { closeSync } from 'node:fs';
import { nativeAddon } from '../../../core/native/addon';
import type { LaneSockets, SocketClosed } from '../replay-clock';
import { asClockError } from './clock-error';
import type { ClockCommand } from './clock-wire';
import type { CommandQueue } from './command-queue';

export class ClockWatchers {
  /** by id: the thread's copy of the socket, and whom to tell it closed */
  private readonly watchers = new Map<number, { fd: number; onClosed: (reason: SocketClosed) => void }>();
  private lastWatcher = 0;

  constructor(
    private readonly commands: CommandQueue,
    /** waits until the thread has done every command so far, and takes its reports */
    private readonly settle: () => void,
  ) {}

  /** The sockets API of a lane whose commands go through `queue`. */
  sockets(queue: (command: ClockCommand) => void): LaneSockets {
    return {
      attach: (fd, fromIndex, first, onClosed) => {
        const id = ++this.lastWatcher;
        const copy = asClockError('E_DUP', () => nativeAddon().duplicateFd(fd));
        this.watchers.set(id, { fd: copy, onClosed });
        this.commands.post({ text: first });
        queue({ kind: 'attach', watcher: id, fd: copy, fromIndex });
        // the thread must take the watcher before this thread runs more releases or reuses ring bytes
        this.settle();
        return id;
      },
      send: (watcher, text) => {
        this.commands.post({ text });
        queue({ kind: 'send', watcher });
      },
      end: (watcher) => queue({ kind: 'end', watcher }),
      detach: (watcher) => queue({ kind: 'detach', watcher }),
    };
  }

  /** The clock closed its copy of a watcher's socket: this thread closes the descriptor and tells the watcher. */
  closed(id: number, reason: SocketClosed): void {
    const watcher = this.watchers.get(id);
    if (!watcher) return;
    this.watchers.delete(id);
    closeSync(watcher.fd);
    watcher.onClosed(reason);
  }

  /** Closes every copy left (the clock thread has ended). */
  closeAll(): void {
    for (const watcher of this.watchers.values()) closeSync(watcher.fd);
    this.watchers.clear();
  }
}
