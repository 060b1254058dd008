import { SseByteParser, SseParser, sseBatches } from '../../cli/sse-client';

describe('reading text/event-stream', () => {
  it('reads id, event and data, joins data lines, skips comments and blocks without data', () => {
    const parser = new SseParser();
    expect(
      parser.push(
        ': keepalive\n\nid: 7\nevent: replay\ndata: {"a":1}\n\nevent: state\ndata:one\ndata: two\n\nevent: empty\n\n',
      ),
    ).toEqual([
      { event: 'replay', id: '7', data: '{"a":1}' },
      { event: 'state', data: 'one\ntwo' },
    ]);
    // a field without a colon is a name with an empty value; a value keeps the colons after the first
    expect(parser.push('data\n\ndata: a: b\n\n')).toEqual([
      { event: 'message', data: '' },
      { event: 'message', data: 'a: b' },
    ]);
  });

  it('completes a message split across chunks, and gives each chunk the messages it completes at once', async () => {
    async function* chunks() {
      for (const text of [
        'id: 1\nevent: replay\nda',
        'ta: x\n\nid: 2\nevent: replay\ndata: y\n\nid: 3\n',
        'data: z\n\n',
      ])
        yield Buffer.from(text);
    }
    const batches = [];
    for await (const batch of sseBatches(chunks())) batches.push(batch.map((m) => `${m.id}:${m.data}`));
    expect(batches).toEqual([['1:x', '2:y'], ['3:z']]);
  });

  /** A replay stream's text: frames, states, comments, a message of two data lines, an unknown event. */
  function streamText(frames: number): string {
    let text = '';
    for (let i = 0; i < frames; i++) {
      text += `id: ${i}\nevent: replay\ndata: {"event_id":"${i}","replay_offset_ns":${i * 10_000},"emitted_late_ns":${i % 7}}\n\n`;
      if (i % 97 === 0) text += ': keepalive\n\n';
      if (i % 211 === 0) text += 'event: state\ndata: {"state":"playing"}\ndata: é\n\n';
      if (i % 307 === 0) text += 'event: warm\ndata: x\n\n';
    }
    return text;
  }

  const read = (parser: SseByteParser, chunks: Buffer[]) =>
    chunks.flatMap((chunk) => parser.push(chunk)).map((m) => `${m.event}|${m.id}|${m.data.toString('utf8')}`);

  it('reads the same messages however the stream is cut into chunks, a block end split included', () => {
    const whole = Buffer.from(streamText(300));
    const expected = read(new SseByteParser(), [whole]);
    expect(expected.filter((m) => m.startsWith('replay|'))).toHaveLength(300);
    expect(expected).toContain('state|undefined|{"state":"playing"}\né');
    expect(expected).toContain('warm|undefined|x');
    // every cut inside the first blocks, each side of each newline among them
    for (let cut = 1; cut < 300; cut++)
      expect(read(new SseByteParser(), [whole.subarray(0, cut), whole.subarray(cut)])).toEqual(expected);
    // many chunks of random sizes, some of one byte
    let seed = 7;
    const random = () => (seed = (seed * 1_103_515_245 + 12_345) % 2 ** 31) / 2 ** 31;
    for (let round = 0; round < 30; round++) {
      const chunks: Buffer[] = [];
      for (let at = 0; at < whole.length;) {
        const size = random() < 0.2 ? 1 : 1 + Math.floor(random() * 3000);
        chunks.push(whole.subarray(at, at + size));
        at += size;
      }
      expect(read(new SseByteParser(), chunks)).toEqual(expected);
    }
  });

  it('copies only the block a chunk ends in the middle of, not the whole next chunk', () => {
    const whole = Buffer.from(streamText(20_000));
    const chunkBytes = 64 << 10;
    // each chunk ends inside a block (the frames' length does not divide 64 KiB)
    const chunks: Buffer[] = [];
    for (let at = 0; at < whole.length; at += chunkBytes) chunks.push(whole.subarray(at, at + chunkBytes));
    const concat = jest.spyOn(Buffer, 'concat');
    try {
      const parser = new SseByteParser();
      let replayed = 0;
      for (const chunk of chunks) replayed += parser.push(chunk).filter((m) => m.event === 'replay').length;
      expect(replayed).toBe(20_000);
      const copied = concat.mock.results.reduce((sum, r) => sum + (r.value as Buffer).length, 0);
      // one block (< 200 bytes) per chunk boundary at most, where joining each chunk copied it all again
      expect(copied).toBeLessThanOrEqual(chunks.length * 200);
    } finally {
      concat.mockRestore();
    }
  });
});
