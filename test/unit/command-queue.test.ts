/** The replay clock's command queue (daemon/replay/clock/command-queue.ts): settle's wait for the clock thread under a wall clock step. */
import { MessageChannel, Worker } from 'node:worker_threads';
import { once } from 'node:events';
import { CommandQueue } from '../../daemon/replay/clock/command-queue';
import { COMMAND_WIDTH, CONTROL, CONTROL_WORDS, SlotRing } from '../../daemon/replay/clock/clock-wire';
import { HOUR_MS, useWallStep } from '../support/wall-step';

/** A clock thread that acknowledges the first sync `ms` after it started, and does nothing else. */
const LATE_ACK = `
const { workerData } = require('node:worker_threads');
const control = new Int32Array(workerData.control);
Atomics.wait(new Int32Array(new SharedArrayBuffer(4)), 0, 0, workerData.ms);
Atomics.store(control, workerData.ack, 1);
Atomics.notify(control, workerData.ack);
`;

const wall = useWallStep();

describe('replay clock command queue', () => {
  it('waits for a clock thread that answers 50 ms late, though the wall clock stepped an hour on at every read', async () => {
    const shared = new SharedArrayBuffer(Int32Array.BYTES_PER_ELEMENT * CONTROL_WORDS);
    const control = new Int32Array(shared);
    const ring = new SlotRing(
      control,
      CONTROL.commandHead,
      CONTROL.commandTail,
      new Float64Array(new SharedArrayBuffer(Float64Array.BYTES_PER_ELEMENT * COMMAND_WIDTH * 4)),
      COMMAND_WIDTH,
    );
    const channel = new MessageChannel();
    const queue = new CommandQueue(control, ring, channel.port1);
    const thread = new Worker(LATE_ACK, {
      eval: true,
      workerData: { control: shared, ack: CONTROL.ack, ms: 50 },
    });
    try {
      await once(thread, 'online');
      wall.stepEveryRead(HOUR_MS);
      expect(() => queue.settle()).not.toThrow();
      expect(Atomics.load(control, CONTROL.ack)).toBe(1);
    } finally {
      channel.port1.close();
      await thread.terminate();
    }
  });
});
