import dns from 'node:dns';
import http from 'node:http';
import net from 'node:net';
import { ReplayLines } from '../../cli/replay-lines';
import { WARM_ROUNDS, warmReads, warmReplayPath } from '../../cli/replay-warm';
import { ResponseStream } from '../../cli/response-stream';
import { SseByteParser } from '../../cli/sse-client';

afterEach(() => jest.restoreAllMocks());

describe("kreplay replay's warm-up", () => {
  it('cuts its stream inside frames, as a socket does, and the parser prints what the general parser reads', () => {
    const reads = warmReads();
    // the same stream WARM_ROUNDS times over, each time ending with a state
    const all = Buffer.concat(reads);
    const round = all.length / WARM_ROUNDS;
    for (let r = 1; r < WARM_ROUNDS; r++)
      expect(all.subarray(0, round).equals(all.subarray(r * round, (r + 1) * round))).toBe(true);
    expect(all.subarray(0, round).toString('latin1')).toMatch(
      /\n\nevent: state\ndata: \{"state":"playing"\}\n\n$/,
    );
    // reads that end inside an id, an event line, a data line, between a frame's two newlines, at its end
    const ends = new Set(
      reads.map((read) => {
        const text = read.toString('latin1');
        if (text.endsWith('\n\n')) return 'frame end';
        if (text.endsWith('}\n')) return 'between newlines';
        const tail = text.split('\n').at(-1)!;
        if (tail.startsWith('data: ')) return 'in data';
        return tail.startsWith('i') ? 'in id' : tail.startsWith('e') ? 'in event' : tail;
      }),
    );
    expect([...ends].sort()).toEqual(['between newlines', 'frame end', 'in data', 'in event', 'in id']);

    const lines = new ReplayLines();
    const printed = reads.map((read) => Buffer.from(lines.push(read).lines).toString('utf8')).join('');
    const parser = new SseByteParser();
    const expected = reads
      .flatMap((read) => parser.push(read))
      .filter((m) => m.event === 'replay')
      .map((m) => `${m.data.toString('utf8')}\n`)
      .join('');
    expect(printed).toBe(expected);
    // every frame of every round, each an event of the daemon's shape
    expect(printed.split('\n').length - 1).toBe(WARM_ROUNDS * 384);
    expect(printed.split('\n')[0]).toMatch(/^\{"event_id":"[0-9a-f]{40}",.*"emitted_late_ns":\d+\}$/);
  });

  it("hands each read to the parser through the stream's reader, from one buffer as a socket's, with no connection", async () => {
    const connect = jest.spyOn(net, 'createConnection');
    const lookup = jest.spyOn(dns, 'lookup');
    const get = jest.spyOn(http, 'get');
    const pushed: Buffer[] = [];
    const buffers = new Set<ArrayBufferLike>();
    const push = ReplayLines.prototype.push;
    jest.spyOn(ReplayLines.prototype, 'push').mockImplementation(function (this: ReplayLines, chunk) {
      pushed.push(Buffer.from(chunk));
      buffers.add(chunk.buffer);
      return push.call(this, chunk);
    });
    const read = jest.spyOn(ResponseStream.prototype, 'read');
    await warmReplayPath(undefined);
    // the reads as cut, one push each (not joined), as a socket's reads reach the CLI's parser
    const reads = warmReads();
    expect(pushed).toHaveLength(reads.length);
    pushed.forEach((chunk, i) => expect(chunk.equals(reads[i]!)).toBe(true));
    // the head, then each read
    expect(read).toHaveBeenCalledTimes(reads.length + 1);
    expect(buffers.size).toBe(1);
    expect(get).not.toHaveBeenCalled();
    expect(connect).not.toHaveBeenCalled();
    expect(lookup).not.toHaveBeenCalled();
  });

  it('collects its garbage once its reads are done, where the launcher exposes the collector, and goes on where it does not', async () => {
    const order: string[] = [];
    const push = ReplayLines.prototype.push;
    jest.spyOn(ReplayLines.prototype, 'push').mockImplementation(function (this: ReplayLines, chunk) {
      order.push('read');
      return push.call(this, chunk);
    });
    await warmReplayPath(() => order.push('gc'));
    expect(order.at(-1)).toBe('gc');
    expect(order.filter((step) => step === 'gc')).toHaveLength(1);
    expect(order).toHaveLength(warmReads().length + 1);
    await expect(warmReplayPath(undefined)).resolves.toBeUndefined();
  });
});
