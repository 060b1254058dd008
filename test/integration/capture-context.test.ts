/**
 * The kernel side of attribution: context markers and HTTP heads open a
 * context, later writes of the thread and of the tasks it creates carry it,
 * and a context record always comes before the events that name it.
 */
import { closeSync, openSync, readFileSync, writeSync, writevSync } from 'node:fs';
import { join } from 'node:path';
import type { DecodedContext, DecodedRecord, DecodedSysWrite } from '../support/decode-records';
import { CONTEXT_DATA_LEN, ContextKind } from '../../core/model';
import { useTempDir } from '../support/temp-dir';
import { captureAround, describeKernel, runToExit } from './capture-harness';

const dir = useTempDir();

const contexts = (records: DecodedRecord[], pid: number): DecodedContext[] =>
  records.filter((r): r is DecodedContext => r.type === 'context' && r.pid === pid);
const writes = (records: DecodedRecord[], pid: number): DecodedSysWrite[] =>
  records.filter((r): r is DecodedSysWrite => r.type === 'sys_write' && r.pid === pid);

function expectContextsBeforeUse(records: DecodedRecord[]): void {
  const seen = new Set<number>();
  for (const r of records) {
    if (r.type === 'context') seen.add(r.contextId);
    else if (r.type === 'target') continue;
    else if (r.contextId !== 0 && !seen.has(r.contextId)) {
      throw new Error(`${r.type} at offset ${r.offset} names context ${r.contextId} before its record`);
    }
  }
}

describeKernel('context tracking', () => {
  it('opens contexts on markers and HTTP heads, and only on them', async () => {
    const fd = openSync(join(dir.path, 'out'), 'w');
    const big = `POST /upload HTTP/1.1\r\n\r\n${'x'.repeat(2000)}`;
    const send = (text: string): void => void writeSync(fd, text);
    const { records } = await captureAround(
      { excludeSelf: false, include: [{ pid: process.pid }], filterTransactions: true },
      () => {
        send('KREPLAY-CTX txn=t1 trace=abc');
        send('after the marker');
        send('KREPLAY-CTXY is no marker');
        send('GET'); // too short for a method token
        send('GET /orders HTTP/1.1\r\nHost: shop\r\n\r\n');
        writevSync(fd, [Buffer.alloc(0), Buffer.from('HTTP/1.1 200 OK\r\n'), Buffer.from('\r\n')]);
        send('KREPLAY-CTX');
        send(big);
      },
    );
    closeSync(fd);

    const opened = contexts(records, process.pid);
    expect(opened.map((c) => [c.kind, c.data.toString()])).toEqual([
      [ContextKind.Marker, 'KREPLAY-CTX txn=t1 trace=abc'],
      [ContextKind.Http, 'GET /orders HTTP/1.1\r\nHost: shop\r\n\r\n'],
      [ContextKind.Http, 'HTTP/1.1 200 OK\r\n'],
      [ContextKind.Marker, 'KREPLAY-CTX'],
      [ContextKind.Http, big.slice(0, CONTEXT_DATA_LEN)],
    ]);
    const [marker, request, response, bare, upload] = opened as [DecodedContext, ...DecodedContext[]];
    expect(request?.parentId).toBe(marker.contextId);
    expect(response?.parentId).toBe(request?.contextId);
    for (const c of opened) expect(c.tid).toBe(process.pid);

    const mine = writes(records, process.pid).filter((w) => w.fd === fd);
    expect(mine.map((w) => w.contextId)).toEqual([
      marker.contextId, // the marker's own write
      marker.contextId,
      marker.contextId,
      marker.contextId,
      request?.contextId,
      response?.contextId,
      bare?.contextId,
      upload?.contextId,
    ]);
    expectContextsBeforeUse(records);
  });

  it('hands the context to child processes, even short-lived ones', async () => {
    const hi = join(dir.path, 'hi');
    const pidFile = join(dir.path, 'child-pid');
    // `; true` keeps sh from exec'ing its last command: the inner sh must be a forked child.
    const script = `printf "KREPLAY-CTX txn=t1\\n" > /dev/null; echo hi > ${hi}; sh -c 'echo $$ > ${pidFile}'; true`;
    const { records, value: shPid } = await captureAround({}, () => runToExit('sh', ['-c', script]));
    const childPid = Number(readFileSync(pidFile, 'utf8'));

    const [marker] = contexts(records, shPid);
    expect(marker).toMatchObject({ kind: ContextKind.Marker, data: Buffer.from('KREPLAY-CTX txn=t1\n') });
    const id = marker?.contextId;
    // before its exec the child is still node (libuv reports to its parent): only sh's own writes
    const shWrites = writes(records, shPid).filter((w) => w.comm === 'sh');
    expect(shWrites.map((w) => [w.count, w.contextId])).toEqual([
      [19, id],
      [3, id],
    ]);
    expect(childPid).not.toBe(shPid);
    expect(writes(records, childPid).map((w) => [w.count, w.contextId])).toEqual([
      [`${childPid}\n`.length, id],
    ]);
    expectContextsBeforeUse(records);
  });

  it("a client connection a request head went out on: a later send by a thread without a context carries none, not the head's", async () => {
    // the plain thread is made before any context (a thread inherits its creator's)
    const script = [
      'import socket, threading',
      'srv = socket.socket(); srv.bind(("127.0.0.1", 0)); srv.listen()',
      'c = socket.create_connection(srv.getsockname()); peer, _ = srv.accept()',
      'go = threading.Event()',
      'def plain():',
      '    go.wait()',
      '    c.send(b"x" * 201)',
      't = threading.Thread(target=plain); t.start()',
      'c.send(b"GET /d HTTP/1.1\\r\\nHost: d\\r\\n\\r\\n")',
      'c.send(b"y" * 202)',
      'go.set(); t.join()',
    ].join('\n');
    const { records, value: pid } = await captureAround({}, () =>
      runToExit('/usr/bin/python3', ['-c', script]),
    );
    const head = contexts(records, pid).find((c) => c.data.toString().startsWith('GET /d '));
    expect(head).toBeDefined();
    const bySize = new Map(writes(records, pid).map((w) => [w.count, w.contextId]));
    expect([bySize.get(28), bySize.get(202), bySize.get(201)]).toEqual([head!.contextId, head!.contextId, 0]);
    expectContextsBeforeUse(records);
  });
});
