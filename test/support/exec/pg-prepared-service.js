// An ordinary Node service on PostgreSQL: node:http and a `pg` Pool (its connections made on first
// use), every statement a named prepared statement (pg Parses one once per connection, then only
// Binds it by name). GET /checkout counts the order, reads a report that takes as long as its
// pg_sleep, reads the total, and counts the order again (by then a Bind of the statement's name
// alone); it answers the total and the report's sleep in JSON, each statement's time on a build's
// stderr ("report: 1.502 s"). Nothing here knows of kreplay.
//
//   pg-prepared-service.js serve PG_PORT PORT_FILE        production: pg_sleep(1.5), serves until killed
//   pg-prepared-service.js once PG_PORT [--listen PORT] [--probe] [--warm-up] [--skip-slow]
//       a CI build: pg_sleep(0), serves (on PORT), requests /checkout of itself once, exits 0 on 200,
//       else 1; --probe: a health statement the incident never ran through the pool first; --warm-up:
//       a connection of its own made, queried and closed before the pool's; --skip-slow: no report
const { performance } = require('node:perf_hooks');
const { runCheckoutService, runMain } = require('./checkout-service');
const { Client, Pool } = require('pg');

const [mode, pgPort] = [process.argv[2], Number(process.argv[3])];
const flag = (name) => process.argv.indexOf(name);
const sleep = mode === 'serve' ? 1.5 : 0;
const connection = { host: '127.0.0.1', port: pgPort, user: 'postgres', database: 'postgres' };

async function main() {
  const pool = new Pool({ ...connection, max: 2 });
  await runCheckoutService({
    mode,
    portFile: process.argv[4],
    listenPort: flag('--listen') > 0 ? Number(process.argv[flag('--listen') + 1]) : 0,
    checkout: async () => {
      // the warm-up's connection comes before the pool's first
      if (flag('--warm-up') > 0) {
        const warm = new Client(connection);
        await warm.connect();
        await warm.query('SELECT 1');
        await warm.end();
      }
      const db = await pool.connect();
      const timed = async (name, text, values) => {
        const start = performance.now();
        const result = await db.query({ name, text, values });
        if (mode === 'once')
          process.stderr.write(`${name}: ${((performance.now() - start) / 1000).toFixed(3)} s\n`);
        return result.rows;
      };
      try {
        if (flag('--probe') > 0) await timed('probe', 'SELECT $1::int AS ok', [1]);
        await timed('update', 'UPDATE orders SET n = n + 1 WHERE id = $1', [42]);
        if (flag('--skip-slow') < 0) await timed('report', 'SELECT pg_sleep($1)', [sleep]);
        const rows = await timed('total', 'SELECT total FROM orders WHERE id = $1', [42]);
        await timed('update', 'UPDATE orders SET n = n + 1 WHERE id = $1', [42]);
        return `${JSON.stringify({ total: rows[0].total, slept: sleep })}\n`;
      } finally {
        db.release();
      }
    },
  });
}

runMain(main);
