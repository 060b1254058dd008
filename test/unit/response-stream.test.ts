import { ResponseStream } from '../../cli/response-stream';
import { HttpError } from '../../cli/sse-client';

const bytes = (text: string) => Buffer.from(text, 'latin1');

/** A connection that counts what the stream asks of it. */
function connection() {
  return {
    resumed: 0,
    destroyed: 0,
    resume() {
      this.resumed++;
    },
    destroy() {
      this.destroyed++;
    },
  };
}

/**
 * A response read by a ResponseStream from `reads`, each copied into one
 * buffer written over by the next (as the socket's), the listener keeping a
 * copy of each chunk; `end` after them: the connection's end.
 */
async function listened(reads: Buffer[], end = true): Promise<{ body: string; chunks: number }> {
  const stream = new ResponseStream(connection());
  const buffer = Buffer.alloc(1 << 16);
  const read = (data: Buffer) => stream.read(buffer.subarray(0, data.copy(buffer)));
  const got: Buffer[] = [];
  let at = 0;
  // up to the head's end (the read that ends it holds the connection), then the listen, as the CLI does
  while (at < reads.length && read(reads[at++]!));
  const listening = (await stream.opened).listen((chunk) => void got.push(Buffer.from(chunk)));
  for (; at < reads.length; at++) read(reads[at]!);
  if (end) stream.end();
  await listening;
  return { body: Buffer.concat(got).toString('latin1'), chunks: got.length };
}

function everyCut(whole: Buffer): Buffer[][] {
  const all: Buffer[][] = [];
  for (let cut = 0; cut <= whole.length; cut++) all.push([whole.subarray(0, cut), whole.subarray(cut)]);
  return all;
}

const BODY = 'id: 1\nevent: replay\ndata: {"a":1}\n\nevent: state\ndata: {"state":"finished"}\n\n';

describe('ResponseStream', () => {
  it('hands a 200 body framed by the connection’s end over as read, wherever the reads are cut', async () => {
    const whole = bytes(
      `HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\nConnection: close\r\n\r\n${BODY}`,
    );
    for (const reads of everyCut(whole)) expect((await listened(reads)).body).toBe(BODY);
  });

  it('reads a chunked 200 body and one of a length, and ends with it, not with the connection', async () => {
    const chunked = bytes(`HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n7\r\nid: 1\n\n\r\n0\r\n\r\n`);
    for (const reads of everyCut(chunked))
      expect(await listened(reads, false)).toMatchObject({ body: 'id: 1\n\n' });
    const length = bytes(`HTTP/1.1 200 OK\r\nContent-Length: 7\r\n\r\nid: 1\n\nnot the body`);
    for (const reads of everyCut(length))
      expect(await listened(reads, false)).toMatchObject({ body: 'id: 1\n\n' });
  });

  it('rejects with the answer’s status and body, however framed', async () => {
    const problem = '{"title":"Not Found"}';
    const heads = [
      `Content-Length: ${problem.length}\r\n\r\n${problem}`,
      `Transfer-Encoding: chunked\r\n\r\n${problem.length.toString(16)}\r\n${problem}\r\n0\r\n\r\n`,
      `Connection: close\r\n\r\n${problem}`,
    ];
    for (const rest of heads) {
      const whole = bytes(`HTTP/1.1 404 Not Found\r\n${rest}`);
      for (const [first, second] of everyCut(whole)) {
        const stream = new ResponseStream(connection());
        stream.read(first!);
        stream.read(second!);
        stream.end();
        const err = (await stream.opened.catch((e: unknown) => e)) as HttpError;
        expect(err).toBeInstanceOf(HttpError);
        expect([err.status, err.body]).toEqual([404, problem]);
      }
    }
  });

  it('holds the connection from the head until listened to, and while a listener’s promise is pending', async () => {
    const link = connection();
    const stream = new ResponseStream(link);
    // the head and the first body bytes in one read: held, kept for the listener
    expect(stream.read(bytes(`HTTP/1.1 200 OK\r\n\r\nid: 1\n\n`))).toBe(false);
    const log: string[] = [];
    let release: () => void = () => undefined;
    const listening = (await stream.opened).listen((chunk) => {
      log.push(chunk.toString());
      if (log.length === 2) return new Promise<void>((resolve) => (release = resolve));
    });
    expect(log).toEqual(['id: 1\n\n']);
    expect(link.resumed).toBe(1);
    expect(stream.read(bytes('id: 2\n\n'))).toBe(false);
    release();
    await Promise.resolve();
    expect(link.resumed).toBe(2);
    expect(stream.read(bytes('id: 3\n\n'))).toBe(true);
    stream.end();
    await listening;
    expect(log).toEqual(['id: 1\n\n', 'id: 2\n\n', 'id: 3\n\n']);
  });

  it('ends after the last listener’s promise when the connection ends during it', async () => {
    const stream = new ResponseStream(connection());
    stream.read(bytes('HTTP/1.1 200 OK\r\n\r\n'));
    let release: () => void = () => undefined;
    let ended = false;
    const listening = (await stream.opened)
      .listen(() => new Promise<void>((resolve) => (release = resolve)))
      .then(() => (ended = true));
    stream.read(bytes('id: 1\n\n'));
    stream.end();
    await Promise.resolve();
    expect(ended).toBe(false);
    release();
    await listening;
    expect(ended).toBe(true);
  });

  it('rejects a body cut before its end as a dropped connection (retried), and an answer that never came', async () => {
    for (const head of [
      'Content-Length: 100\r\n\r\nid: 1\n\n',
      'Transfer-Encoding: chunked\r\n\r\n7\r\nid: 1\n\n\r\n',
    ]) {
      const stream = new ResponseStream(connection());
      stream.read(bytes(`HTTP/1.1 200 OK\r\n${head}`));
      const listening = (await stream.opened).listen(() => undefined);
      stream.end();
      await expect(listening).rejects.toMatchObject({
        code: 'ECONNRESET',
        message: 'the event stream closed before its end',
      });
    }
    const none = new ResponseStream(connection());
    none.read(bytes('HTTP/1.1 200'));
    none.end();
    await expect(none.opened).rejects.toMatchObject({ code: 'ECONNRESET' });
  });

  it('refuses an answer it cannot read safely, closing the connection, with an error that is not retried', async () => {
    const link = connection();
    const stream = new ResponseStream(link);
    expect(stream.read(bytes('HTTP/1.1 200 OK\r\nContent-Encoding: gzip\r\n\r\n\x1f\x8b'))).toBe(false);
    await expect(stream.opened).rejects.toMatchObject({
      code: 'E_HTTP_PROTOCOL',
      message: expect.stringMatching(/encoded gzip/),
    });
    expect(link.destroyed).toBeGreaterThan(0);
    const chunks = new ResponseStream(connection());
    chunks.read(bytes('HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n'));
    const listening = (await chunks.opened).listen(() => undefined);
    chunks.read(bytes('zz\r\n'));
    await expect(listening).rejects.toMatchObject({ code: 'E_HTTP_PROTOCOL' });
  });

  it('resolves when closed while listening; rejects with what a listener throws or its promise rejects', async () => {
    const closed = new ResponseStream(connection());
    closed.read(bytes('HTTP/1.1 200 OK\r\n\r\n'));
    const stream = await closed.opened;
    const listening = stream.listen(() => stream.close());
    closed.read(bytes('id: 1\n\n'));
    await expect(listening).resolves.toBeUndefined();

    const throwing = new ResponseStream(connection());
    throwing.read(bytes('HTTP/1.1 200 OK\r\n\r\nid: 1\n\n'));
    await expect(
      (await throwing.opened).listen(() => {
        throw new Error('stopped');
      }),
    ).rejects.toThrow('stopped');

    const rejecting = new ResponseStream(connection());
    rejecting.read(bytes('HTTP/1.1 200 OK\r\n\r\n'));
    const failing = (await rejecting.opened).listen(() => Promise.reject(new Error('output gone')));
    rejecting.read(bytes('id: 1\n\n'));
    await expect(failing).rejects.toThrow('output gone');
  });
});
