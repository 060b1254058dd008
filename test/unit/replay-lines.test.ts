import { ReplayLines } from '../../cli/replay-lines';
import { SseByteParser } from '../../cli/sse-client';

/**
 * A replay stream's text: the daemon's frames (some data not ASCII), and
 * among them what the general parser reads: comments, states, a replay of two
 * data lines, one without an id, one with a field after its data, an id of
 * more digits than the daemon sends, an id-only block, an unknown event, a
 * block ended by CR LF (not an end: the parser splits on LF only).
 */
function streamText(frames: number): string {
  let text = '';
  for (let i = 0; i < frames; i++) {
    const summary = i % 5 === 0 ? 'é ✓' : 'GET /item';
    text += `id: ${i}\nevent: replay\ndata: {"event_id":"${i}","summary":"${summary}","replay_offset_ns":${i * 10_000},"emitted_late_ns":${i % 7}}\n\n`;
    if (i % 23 === 0) text += ': keepalive\n\n';
    if (i % 31 === 0) text += 'event: state\ndata: {"state":"playing"}\n\n';
    if (i % 37 === 1) text += `id: ${i}.5\nevent: replay\ndata: {"a":1}\ndata: {"b":2}\n\n`;
    if (i % 41 === 2) text += 'event: replay\ndata: {"no":"id"}\n\n';
    if (i % 43 === 3) text += `id: ${i}.7\nevent: replay\ndata: {"c":3}\nretry: 10\n\n`;
    if (i % 47 === 4) text += `id: 1234567890123456789\nevent: replay\ndata: {"d":4}\n\n`;
    if (i % 53 === 5) text += `id: ${i}.9\n\n`;
    if (i % 59 === 6) text += 'event: warm\ndata: x\n\n';
    if (i === 70) text += 'id: 99\r\nevent: replay\r\ndata: {"crlf":1}\r\n\r\n';
  }
  return text;
}

interface Printed {
  /** what stdout gets: the replay events' data, a line each */
  out: string;
  /** the Last-Event-ID after each read (the last id seen so far) */
  ids: (string | undefined)[];
  /** the other messages */
  others: string[];
}

/** What the CLI prints and resumes with, read by the general parser (the reference). */
function byParser(chunks: Buffer[]): Printed {
  const parser = new SseByteParser();
  const printed: Printed = { out: '', ids: [], others: [] };
  let id: string | undefined;
  for (const chunk of chunks) {
    for (const m of parser.push(chunk)) {
      if (m.event !== 'replay') printed.others.push(`${m.event}|${m.id}|${m.data.toString('utf8')}`);
      else {
        printed.out += `${m.data.toString('utf8')}\n`;
        if (m.id !== undefined) id = m.id;
      }
    }
    printed.ids.push(id);
  }
  return printed;
}

/** The same, read by ReplayLines; every read's lines checked to end with the last line where it says. */
function byLines(chunks: Buffer[], keepEvery = 0): Printed {
  const lines = new ReplayLines();
  const printed: Printed = { out: '', ids: [], others: [] };
  let id: string | undefined;
  const held: [Buffer, string][] = [];
  chunks.forEach((chunk, n) => {
    const read = lines.push(chunk);
    const text = read.lines.toString('utf8');
    if (read.lines.length > 0) {
      // a line's data may be of two lines (two data fields), so the last one starts after a newline
      expect(read.lastLine === 0 || read.lines[read.lastLine - 1] === 10).toBe(true);
      expect(read.lines.at(-1)).toBe(10);
    } else expect(read.lastLine).toBe(-1);
    printed.out += text;
    printed.others.push(...read.others.map((m) => `${m.event}|${m.id}|${m.data}`));
    if (read.lastId !== undefined) id = read.lastId;
    printed.ids.push(id);
    // a writer that still holds its lines: they stay as they were whatever is read next
    if (keepEvery > 0 && n % keepEvery === 0) {
      lines.keep();
      held.push([read.lines, text]);
    }
  });
  for (const [bytes, text] of held) expect(bytes.toString('utf8')).toBe(text);
  return printed;
}

describe('ReplayLines: a replay stream as the CLI prints it', () => {
  const whole = Buffer.from(streamText(120));

  it('prints what the general parser reads, in one read', () => {
    const expected = byParser([whole]);
    expect(expected.out.split('\n').filter((line) => line.startsWith('{"event_id"'))).toHaveLength(120);
    expect(expected.out).toContain('{"a":1}\n{"b":2}\n');
    expect(expected.others).toContain('state|undefined|{"state":"playing"}');
    expect(expected.others).toContain('warm|undefined|x');
    expect(byLines([whole])).toEqual(expected);
  });

  it('prints the same, with the same last id after each read, wherever a read ends (every byte of the first frames)', () => {
    for (let cut = 1; cut < 2_000; cut++) {
      const chunks = [whole.subarray(0, cut), whole.subarray(cut)];
      expect(byLines(chunks)).toEqual(byParser(chunks));
    }
  });

  it('prints the same in reads of every size, from one byte, with the lines of some reads still held', () => {
    let seed = 11;
    const random = () => (seed = (seed * 1_103_515_245 + 12_345) % 2 ** 31) / 2 ** 31;
    for (let round = 0; round < 60; round++) {
      const chunks: Buffer[] = [];
      for (let at = 0; at < whole.length;) {
        const size = random() < 0.3 ? 1 + Math.floor(random() * 3) : 1 + Math.floor(random() * 2_000);
        // fresh buffers, as a socket's reads are
        chunks.push(Buffer.from(whole.subarray(at, at + size)));
        at += size;
      }
      expect(byLines(chunks, 1 + (round % 4))).toEqual(byParser(chunks));
    }
  });

  it('prints the same from reads in one buffer written over by each (a socket read with onread)', () => {
    let seed = 5;
    const random = () => (seed = (seed * 1_103_515_245 + 12_345) % 2 ** 31) / 2 ** 31;
    const shared = Buffer.alloc(4_096);
    for (let round = 0; round < 20; round++) {
      const fresh: Buffer[] = [];
      for (let at = 0; at < whole.length;) {
        const size = 1 + Math.floor(random() * (random() < 0.3 ? 3 : shared.length));
        fresh.push(Buffer.from(whole.subarray(at, at + size)));
        at += size;
      }
      const lines = new ReplayLines();
      let out = '';
      for (const chunk of fresh)
        out += lines.push(shared.subarray(0, chunk.copy(shared))).lines.toString('utf8');
      expect(out).toBe(byParser(fresh).out);
    }
  });

  it('takes one buffer for every read while none is held, and decodes one id a read, no view an event', () => {
    const frames = 20_000;
    let text = '';
    for (let i = 0; i < frames; i++)
      text += `id: ${i}\nevent: replay\ndata: {"event_id":"${i}","replay_offset_ns":${i * 10_000}}\n\n`;
    const stream = Buffer.from(text);
    const chunks: Buffer[] = [];
    for (let at = 0; at < stream.length; at += 64 << 10) chunks.push(stream.subarray(at, at + (64 << 10)));
    const lines = new ReplayLines();
    const toString = jest.spyOn(Buffer.prototype, 'toString');
    const subarray = jest.spyOn(Buffer.prototype, 'subarray');
    try {
      const buffers = new Set<ArrayBufferLike>();
      let printed = 0;
      let last: string | undefined;
      for (const chunk of chunks) {
        const read = lines.push(chunk);
        buffers.add(read.lines.buffer);
        printed += read.lines.filter((byte) => byte === 10).length;
        last = read.lastId ?? last;
      }
      expect(printed).toBe(frames);
      expect(last).toBe(String(frames - 1));
      expect(buffers.size).toBe(1);
      // decoded: the read's last id, and that of the block begun in the read before (read by the
      // general parser); none an event
      expect(toString.mock.calls.length).toBeLessThanOrEqual(2 * chunks.length);
      // and the lines, the rest, the block begun before and its data: views a read, none an event
      expect(subarray.mock.calls.length).toBeLessThanOrEqual(4 * chunks.length);
    } finally {
      toString.mockRestore();
      subarray.mockRestore();
    }
  });
});
