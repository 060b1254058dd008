/**
 * The Python hook on the WSGI servers people deploy, started the ordinary way with Debian's
 * packages and a Flask application (test/support/runtimes/wsgi_app.py): gunicorn's sync, gthread
 * and gevent workers and uWSGI's threads (its uwsgi-core embeds libpython3.11: found by it). Each
 * call of the application is a unit opened from its request's head; a thread (a greenlet under
 * gevent) the request starts carries it. A bare WSGI function (test/support/runtimes/wsgi_bare.py, no
 * framework) under gunicorn and wsgiref's threading simple_server (gevent-patched too): the server's
 * request is the unit.
 * Every request's writes are its own at 1, 8, 64 and 256 concurrent, keep-alive and not.
 * The hook's signals a gunicorn gthread request costs, counted by strace: its main thread hands each
 * connection to the pool through its mailbox, not a write.
 */
import { UnitOp, UnitSignalLayout } from '../../core/model/record-layout';
import {
  gunicorn,
  gunicornServing,
  processTree,
  uwsgi,
  UWSGI_THREADS,
  wsgiref,
} from '../../bench/python-server-commands';
import { join } from 'node:path';
import { RecordType } from '../../core/model/record-layout';
import { startNginx } from '../support/nginx';
import { formatScore, PER_LEVEL, PythonServers } from '../support/python-servers';
import { writesUnder } from '../support/request-accuracy';
import { readStoredEvents } from '../support/store-rows';
import { straceAttached } from '../support/strace';

const servers = new PythonServers();
const FILES = 3;
/* wsgi_reporter.py's calls per worker; gunicornServing starts two workers */
const REPORTS = 20;

beforeAll(() => servers.start('wsgi'), 60_000);
// the agent flushes its store before it exits
afterAll(() => servers.stop(), 30_000);

describe('the Python hook on WSGI servers (real kernel)', () => {
  it.each([
    ['gunicorn sync', gunicorn('sync'), Infinity],
    ['gunicorn gthread', gunicorn('gthread', '--threads', '4'), Infinity],
    ['gunicorn gevent', gunicorn('gevent'), Infinity],
    // a thread serves one connection until the client closes it: as many kept alive at once
    ['uWSGI threads', uwsgi, UWSGI_THREADS],
  ])(
    '%s + Flask: every request its own writes',
    async (name, command, keepAliveUpTo) => {
      const label = name.replace(/\W+/g, '-');
      const server = await servers.serve(label, command);
      await servers.warm(server, '/', FILES);
      expect(await servers.everyLevel(server, label, { files: FILES, keepAliveUpTo })).toEqual([]);
      server.child.kill();
    },
    300_000,
  );

  it.each([
    ['gunicorn gthread', gunicornServing('wsgi_bare:app', 'gthread', '--threads', '4')],
    // a thread per connection reads its own request's head: the kernel alone follows it; greenlets
    // on one thread it cannot
    ['wsgiref threading', wsgiref()],
    ['wsgiref threading under gevent', wsgiref('gevent')],
  ])(
    '%s + a bare WSGI function: every request its own writes',
    async (name, command) => {
      const label = `${name.replace(/\W+/g, '-')}-bare`;
      const server = await servers.serve(label, command);
      await servers.warm(server, '/', FILES);
      expect(await servers.everyLevel(server, label, { files: FILES })).toEqual([]);
      server.child.kill();
    },
    300_000,
  );

  it("gunicorn sync, its app calling a real nginx: every request its own writes, and a worker's own thread calling nginx (a metrics pusher) carries each call's transaction in the call only, none after it (urllib closes its connection)", async () => {
    const nginx = await startNginx(join(servers.dir, 'nginx'));
    try {
      const label = 'sync-reporter';
      const server = await servers.serve(label, gunicornServing('wsgi_reporter:app', 'sync'), nginx.port);
      await servers.warm(server, '/', FILES);
      const scores = [];
      for (const keepAlive of [true, false])
        scores.push(formatScore(await servers.measure(server, label, 8, { files: FILES, keepAlive })));
      // each report's call to nginx carries its trace's transaction; the write after the call
      // none (before: the call's, for good)
      const reports = await writesUnder(servers.store, server.out, 'report-', 2 * REPORTS);
      const calls = readStoredEvents(
        servers.store,
        `e.type = ${RecordType.SysWrite} AND t.value = 'tcp 127.0.0.1:${nginx.port}'`,
      );
      const traces = reports.map((e) => e.target!.slice(`${server.out}/report-`.length));
      server.child.kill();
      expect({
        scores,
        reports: reports.length,
        'reports with a transaction': reports.filter((e) => e.txn !== null).length,
        'report calls carrying their own': traces.filter((t) => calls.filter((e) => e.txn === t).length === 1)
          .length,
      }).toEqual({
        scores: [`${PER_LEVEL * FILES}/0/0/0`, `${PER_LEVEL * FILES}/0/0/0`],
        reports: 2 * REPORTS,
        'reports with a transaction': 0,
        'report calls carrying their own': 2 * REPORTS,
      });
    } finally {
      await nginx.stop();
    }
  }, 300_000);

  it("gunicorn gthread: the main thread's hand-off of each connection is no signal; a request's are its OPEN, CLOSE and started thread's; every request its own writes", async () => {
    const label = 'gthread-signals';
    const server = await servers.serve(label, gunicornServing('wsgi_bare:app', 'gthread', '--threads', '4'));
    await servers.warm(server, '/', FILES);
    // the workers: the processes of the tree with no child (its pid is each one's main thread)
    const tree = processTree(server.child.pid!);
    const workers = tree.filter((pid) => processTree(pid).length === 1);
    const trace = await straceAttached(servers.dir, 'write,getpriority', workers);
    const scores = [];
    for (const keepAlive of [true, false])
      scores.push(formatScore(await servers.measure(server, label, 8, { files: FILES, keepAlive })));
    const lines = await trace.stop();
    server.child.kill();
    // "<tid> write(2147483647, "\x4b\x52...", n) = -1 EBADF": the op is the u32 after the magic
    const signals = lines.flatMap((line) => {
      const m = new RegExp(`^(\\d+) +write\\(${UnitSignalLayout.fd}, "((?:\\\\x[0-9a-f]{2})+)`).exec(line);
      return m
        ? [
            {
              tid: Number(m[1]),
              op: parseInt(m[2]!.slice(4 * UnitSignalLayout.op + 2, 4 * UnitSignalLayout.op + 4), 16),
            },
          ]
        : [];
    });
    const count = (op: number) => signals.filter((s) => s.op === op).length;
    const mailers = lines.flatMap((line) => {
      const m = /^(\d+) +getpriority\(PRIO_PROCESS, 0/.exec(line);
      return m ? [Number(m[1])] : [];
    });
    const mailed = mailers.length;
    const requests = 2 * PER_LEVEL;
    process.stdout.write(
      `gunicorn gthread, ${requests} requests: ${signals.length} signals written (${count(UnitOp.Handoff)} HANDOFF, ${count(UnitOp.Adopt)} ADOPT, ${count(UnitOp.Watch)} WATCH), ${mailed} getpriority\n`,
    );
    expect({
      scores,
      'by the main threads': signals.filter((s) => workers.includes(s.tid)).length,
      'mailed by the main threads': mailers.filter((tid) => workers.includes(tid)).length,
      handoffs: count(UnitOp.Handoff),
      // each request's started thread signals once (its ADOPT): one write, as a mailbox would cost
      adopts: count(UnitOp.Adopt),
      // the pool thread's OPEN and CLOSE, and the HANDOFF to the thread the request starts
      mailed,
    }).toEqual({
      scores: [`${PER_LEVEL * FILES}/0/0/0`, `${PER_LEVEL * FILES}/0/0/0`],
      'by the main threads': 0,
      'mailed by the main threads': 0,
      handoffs: 0,
      adopts: requests,
      mailed: 3 * requests,
    });
  }, 300_000);
});
