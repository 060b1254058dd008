import { SseParser, sseBatches } from '../../cli/sse-client';

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
});
