// An ordinary Node service on MariaDB: node:http and npm `mysql2` through a pool. GET /checkout
// counts the order (UPDATE), reads a report that takes as long as its SLEEP, then the order's total,
// each a prepared statement (pool.execute(): COM_STMT_PREPARE once per connection, then
// COM_STMT_EXECUTE by the statement's id), or with --api query the text protocol (pool.query()); it
// answers the total, the report's SLEEP and the time the database took, in JSON (a reply whose
// bytes vary run to run, as a real service's dates, ids and timings do), and prints each statement's
// time on stderr (a build's only). Nothing here knows of kreplay.
//
//   mysql-service.js serve DB_PORT PORT_FILE [--sleep S] [--api execute|query]  production: serves until killed
//   mysql-service.js once DB_PORT [--listen PORT] [--sleep S] [--api execute|query] [--probe]
//                         [--warm-up] [--skip-slow]
//       a CI build: serves (on PORT), requests /checkout of itself once, exits 0 on 200, else 1.
//       --sleep: the report's SLEEP (default 1.5 serving, 0 once: its reply a few bytes shorter); --probe: a health query
//       (SELECT ? AS ok, a statement the incident never ran) through the pool first; --warm-up: a
//       connection of its own made, pinged and closed before the pool's; --skip-slow: no report
const { performance } = require('node:perf_hooks');
const { runCheckoutService, runMain } = require('./checkout-service');
const mysql = require('mysql2/promise');

const [mode, dbPort] = [process.argv[2], Number(process.argv[3])];
const flag = (name) => process.argv.indexOf(name);
const value = (name, fallback) => (flag(name) > 0 ? process.argv[flag(name) + 1] : fallback);
const sleep = Number(value('--sleep', mode === 'serve' ? '1.5' : '0'));
const api = value('--api', 'execute');
const connection = { host: '127.0.0.1', port: dbPort, user: 'app', database: 'shop' };

async function main() {
  const pool = mysql.createPool({ ...connection, connectionLimit: 2 });
  const run = (sql, values) => (api === 'query' ? pool.query(sql, values) : pool.execute(sql, values));
  await runCheckoutService({
    mode,
    portFile: process.argv[4],
    listenPort: Number(value('--listen', '0')),
    checkout: async () => {
      if (flag('--warm-up') > 0) {
        const warm = await mysql.createConnection(connection);
        await warm.ping();
        await warm.end();
      }
      // each statement's time on stderr ("update: 0.002 s")
      const timed = async (name, sql, values) => {
        const start = performance.now();
        const [rows] = await run(sql, values);
        // a build's only: production's stderr is nobody's (/dev/null), and a replay never holds the build's
        if (mode === 'once')
          process.stderr.write(`${name}: ${((performance.now() - start) / 1000).toFixed(3)} s\n`);
        return rows;
      };
      if (flag('--probe') > 0) await timed('probe', 'SELECT ? AS ok', [1]);
      const start = performance.now();
      await timed('update', 'UPDATE orders SET n = n + 1 WHERE id = ?', [42]);
      if (flag('--skip-slow') < 0) await timed('report', 'SELECT SLEEP(?) AS report', [sleep]);
      const rows = await timed('total', 'SELECT total FROM orders WHERE id = ?', [42]);
      // the database's time to the tenth of a millisecond: production's 1503.2, a build's 20.1
      const reply = {
        total: rows[0].total,
        slept: sleep,
        db_ms: Math.round((performance.now() - start) * 10) / 10,
      };
      return `${JSON.stringify(reply)}\n`;
    },
  });
}

runMain(main);
