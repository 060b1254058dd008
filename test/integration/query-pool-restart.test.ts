/**
 * Query workers that keep dying (here: a worker module that throws as it
 * starts) are started again with a growing delay, not in a tight loop; while
 * none is up, queries are refused at once with 503 query-workers-down naming
 * the cause, and /readyz says the daemon is degraded. The delays are read
 * from what the pool logs, so nothing here depends on the machine's speed.
 */
import { join } from 'node:path';
import { createLogger } from '../../core/log/logger';
import { ProblemError } from '../../daemon/http/problem';
import { healthRouter } from '../../daemon/health/health-router';
import { QueryPool } from '../../daemon/queries/query-pool';
import { NodeStores } from '../../daemon/store/node-stores';
import { useTempDir } from '../support/temp-dir';
import { waitFor } from '../support/wait';
import { HOUR_MS, useWallStep } from '../support/wall-step';
import express from 'express';
import { once } from 'node:events';
import type { AddressInfo } from 'node:net';

const dir = useTempDir('kreplay-query-restart-');

describe('query workers that keep dying', () => {
  it('are restarted after 0, 100, 200, 400 ms …, and queries meanwhile get 503 naming why', async () => {
    const lines: { msg: string; delayMs?: number; failures?: number }[] = [];
    const log = createLogger({
      format: 'json',
      level: 'warn',
      write: (line) => lines.push(JSON.parse(line) as (typeof lines)[number]),
    });
    const pool = new QueryPool({
      dataDir: dir.path,
      log,
      workers: 1,
      workerModule: { dir: join(__dirname, '..', 'support'), name: 'dying-query-worker' },
    });
    try {
      const restarts = () => lines.filter((l) => l.msg === 'query worker died; starting another');
      await waitFor(() => restarts().length >= 5, { what: 'five restarts', timeoutMs: 30_000 });
      expect(
        restarts()
          .map((l) => l.delayMs)
          .slice(0, 5),
      ).toEqual([0, 100, 200, 400, 800]);
      expect(
        restarts()
          .map((l) => l.failures)
          .slice(0, 5),
      ).toEqual([1, 2, 3, 4, 5]);

      const refused = await pool.reader.nodes().catch((err: unknown) => err);
      expect(refused).toBeInstanceOf(ProblemError);
      expect(refused).toMatchObject({ kind: 'query-workers-down' });
      expect((refused as ProblemError).detail).toContain('this query worker cannot start');
      expect(Number((refused as ProblemError).headers?.['Retry-After'])).toBeGreaterThanOrEqual(1);

      const app = express().use(healthRouter(new NodeStores(dir.path, log), () => pool.health()));
      const server = app.listen(0, '127.0.0.1');
      await once(server, 'listening');
      const res = await fetch(`http://127.0.0.1:${(server.address() as AddressInfo).port}/readyz`);
      const body = (await res.json()) as { status: string; query_workers: ReturnType<QueryPool['health']> };
      server.close();
      expect(res.status).toBe(503);
      expect(body.status).toBe('degraded');
      expect(body.query_workers).toMatchObject({ workers: 1, up: 0 });
      expect(body.query_workers.restarting[0]!.error).toContain('this query worker cannot start');
      expect(body.query_workers.restarting[0]!.failures).toBeGreaterThanOrEqual(5);
    } finally {
      await pool.close();
    }
  }, 30_000);

  describe('on a wall clock that steps', () => {
    const wall = useWallStep();

    it('counts a worker that dies soon after it came up as failing, though the clock stepped an hour on at every read', async () => {
      const lines: { msg: string; delayMs?: number; failures?: number }[] = [];
      const log = createLogger({
        format: 'json',
        level: 'warn',
        write: (line) => lines.push(JSON.parse(line) as (typeof lines)[number]),
      });
      wall.stepEveryRead(HOUR_MS);
      const pool = new QueryPool({
        dataDir: dir.path,
        log,
        workers: 1,
        workerModule: { dir: join(__dirname, '..', 'support'), name: 'brief-query-worker' },
      });
      try {
        const restarts = () => lines.filter((l) => l.msg === 'query worker died; starting another');
        await waitFor(() => restarts().length >= 4, { what: 'four restarts', timeoutMs: 30_000 });
        // up for 20 ms each time, not for hours: never healthy, so the delay grows
        expect(
          restarts()
            .slice(0, 4)
            .map((l) => [l.failures, l.delayMs]),
        ).toEqual([
          [1, 0],
          [2, 100],
          [3, 200],
          [4, 400],
        ]);
      } finally {
        await pool.close();
      }
    }, 30_000);

    it('never takes busy seconds back (a counter) when the clock steps an hour back during a query', async () => {
      const pool = new QueryPool({
        dataDir: dir.path,
        log: createLogger({ level: 'error', format: 'json', write: () => {} }),
        workers: 1,
        timeoutMs: 60_000,
        workerModule: { dir: join(__dirname, '..', 'support'), name: 'silent-query-worker' },
      });
      await pool.ready();
      const running = pool.reader.nodes().catch((err: unknown) => err);
      try {
        await waitFor(() => pool.stats().busy === 1, { what: 'the query running' });
        const before = pool.stats().busySeconds;
        wall.step(-HOUR_MS);
        expect(pool.stats().busySeconds).toBeGreaterThanOrEqual(before);
      } finally {
        await pool.close();
        await running;
      }
    });
  });

  it('closing fails a running query at once, and its deadline no longer starts a worker', async () => {
    const lines: { msg: string }[] = [];
    const log = createLogger({
      format: 'json',
      level: 'warn',
      write: (line) => lines.push(JSON.parse(line) as (typeof lines)[number]),
    });
    const pool = new QueryPool({
      dataDir: dir.path,
      log,
      workers: 1,
      timeoutMs: 200,
      workerModule: { dir: join(__dirname, '..', 'support'), name: 'silent-query-worker' },
    });
    await pool.ready();
    const running = pool.reader.nodes().catch((err: unknown) => err);
    await new Promise((resolve) => setTimeout(resolve, 50));
    await pool.close();
    expect(await running).toMatchObject({ kind: 'shutting-down' });
    await new Promise((resolve) => setTimeout(resolve, 400));
    expect(lines.map((l) => l.msg)).not.toContain('query timed out; its worker was replaced');
  });

  it('reports every worker up on a healthy pool', async () => {
    const pool = new QueryPool({
      dataDir: dir.path,
      log: createLogger({ level: 'error', format: 'json', write: () => {} }),
      workers: 2,
    });
    try {
      await pool.ready();
      expect(pool.health()).toEqual({ workers: 2, up: 2, restarting: [] });
      expect(await pool.reader.nodes()).toEqual([]);
    } finally {
      await pool.close();
    }
  });
});
