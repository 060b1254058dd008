import { Chunks, KeyWatch, Splitter } from '../../bench/probe-chunks';

const KEY = Buffer.from('event: state\n');
const STREAM = Buffer.from(
  'id: 1\nevent: replay\ndata: {"a":1}\n\n' +
    'event: state\ndata: {"state":"finished"}\n\n' +
    'id: 2\nevent: replay\ndata: {}\n\n',
);
const AT = STREAM.indexOf(KEY);

/** `bytes` cut at `cuts` (ascending offsets) into reads */
function cut(bytes: Buffer, cuts: number[]): Buffer[] {
  const reads: Buffer[] = [];
  let from = 0;
  for (const to of [...cuts, bytes.length]) {
    reads.push(bytes.subarray(from, to));
    from = to;
  }
  return reads.filter((r) => r.length > 0);
}

/** the index of the read in which a KeyWatch first says it saw the key (-1: never) */
function seenAt(reads: Buffer[]): number {
  const watch = new KeyWatch(KEY);
  return reads.findIndex((read) => watch.seen(read));
}

/** the read holding the key's last byte */
function endsIn(reads: Buffer[]): number {
  let end = 0;
  for (let i = 0; i < reads.length; i++) {
    end += reads[i]!.length;
    if (end >= AT + KEY.length) return i;
  }
  return -1;
}

describe('the replay probe: a key watched for across reads', () => {
  it('is seen in the read where it ends, wherever the stream is cut in two or three', () => {
    for (let a = 0; a <= STREAM.length; a++) {
      const two = cut(STREAM, [a]);
      expect(seenAt(two)).toBe(endsIn(two));
      for (let b = a; b <= Math.min(STREAM.length, a + KEY.length + 1); b++) {
        const three = cut(STREAM, [a, b]);
        expect(seenAt(three)).toBe(endsIn(three));
      }
    }
  });

  it('is seen in reads of one byte, and only once', () => {
    const watch = new KeyWatch(KEY);
    const seen: number[] = [];
    for (let i = 0; i < STREAM.length; i++) if (watch.seen(STREAM.subarray(i, i + 1))) seen.push(i);
    expect(seen).toEqual([AT + KEY.length - 1]);
  });

  it('is not seen in a stream without it', () => {
    const none = Buffer.from('id: 1\nevent: replay\ndata: {"event":"state"}\n\n'.repeat(4));
    const watch = new KeyWatch(KEY);
    expect(cut(none, [7, 8, 30, 100]).some((read) => watch.seen(read))).toBe(false);
  });
});

describe('the replay probe: chunks kept during the play, parsed after', () => {
  it('gives every part with its own chunk arrival, as parsing each chunk as it came does', () => {
    const lines = Buffer.from(Array.from({ length: 50 }, (_, i) => `{"i":${i}}\n`).join(''));
    const reads = cut(lines, [3, 4, 40, 41, 42, 200, 333]);
    const parts = (collect: (splitter: Splitter) => void) => {
      const got: [string, number][] = [];
      collect(new Splitter(10, (bytes, from, to, at) => got.push([bytes.toString('utf8', from, to), at])));
      return got;
    };
    const asTheyCame = parts((splitter) => reads.forEach((read, i) => splitter.push(read, 1000 + i)));
    const kept = parts((splitter) => {
      const chunks = new Chunks(splitter);
      reads.forEach((read, i) => chunks.keep(read, 1000 + i));
      chunks.drain();
      chunks.drain(); // drained twice: nothing given twice
    });
    expect(kept).toEqual(asTheyCame);
    expect(kept.map(([line]) => line)).toEqual(Array.from({ length: 50 }, (_, i) => `{"i":${i}}`));
    // the line ended in the read at offset 333 arrived with that read
    expect(
      kept.find(([line]) => line === `{"i":${lines.subarray(0, 333).toString().split('\n').length - 1}}`)![1],
    ).toBe(1007);
  });
});

describe('the replay probe: what it holds while it plays', () => {
  const lines = Buffer.from(Array.from({ length: 40 }, (_, i) => `{"i":${i}}\n`).join(''));
  const expected = Array.from({ length: 40 }, (_, i) => `{"i":${i}}`);

  /** the lines given after keeping `reads` (draining where `drainAt` says), with a buffer of `capacity` */
  function keptLines(reads: Buffer[], capacity: number, drainAt: (i: number) => boolean): string[] {
    const got: string[] = [];
    const chunks = new Chunks(
      new Splitter(10, (bytes, from, to) => got.push(bytes.toString('utf8', from, to))),
      capacity,
    );
    reads.forEach((read, i) => {
      chunks.keep(read, i);
      if (drainAt(i)) chunks.drain();
    });
    chunks.drain();
    return got;
  }

  it('keeps a copy of each read: a reader that reuses its buffer after keep changes nothing kept', () => {
    const reads = cut(lines, [5, 17, 60, 61, 150]);
    const reused = reads.map((read) => Buffer.from(read));
    const got: string[] = [];
    const chunks = new Chunks(
      new Splitter(10, (bytes, from, to) => got.push(bytes.toString('utf8', from, to))),
    );
    for (const read of reused) {
      chunks.keep(read, 0);
      read.fill(0x21); // the stream's next read lands in the same memory
    }
    chunks.drain();
    expect(got).toEqual(expected);
  });

  it('gives every line once, in order, when its buffer fills and another is taken, across drains', () => {
    const reads = cut(lines, [3, 4, 40, 41, 42, 100, 101, 170, 171, 230]);
    for (const capacity of [1, 7, 64, 200, 4096])
      for (const every of [1, 2, 3, 100])
        expect(keptLines(reads, capacity, (i) => i % every === every - 1)).toEqual(expected);
  });

  it('takes a prepared buffer once: Chunks made after one prepare each keep their own copies', () => {
    const got: Record<string, string[]> = { a: [], b: [], c: [] };
    const make = (name: string, capacity: number) =>
      new Chunks(
        new Splitter(10, (bytes, from, to) => got[name]!.push(bytes.toString('utf8', from, to))),
        capacity,
      );
    Chunks.prepare(64);
    // another size does not take it; the next of its size does, and the one after has its own
    const [c, a, b] = [make('c', 32), make('a', 64), make('b', 64)];
    a.keep(Buffer.from('{"a":1}\n'), 0);
    b.keep(Buffer.from('{"b":1}\n'), 0);
    c.keep(Buffer.from('{"c":1}\n'), 0);
    for (const chunks of [a, b, c]) chunks.drain();
    expect(got).toEqual({ a: ['{"a":1}'], b: ['{"b":1}'], c: ['{"c":1}'] });
  });
});
