// An ordinary Node service on PostgreSQL: node:http and the npm `pg` client (one connection per
// process, made at start as services do, with pg's own client-side query_timeout). GET /checkout
// reads the order's total with a parameterised query (pg's extended protocol: Parse, Bind, Execute)
// and answers 200, or 502 when the database failed or took longer than the timeout. Nothing here
// knows of kreplay.
//
//   pg-service.js serve PG_PORT PORT_FILE       production: serves until killed
//   pg-service.js once PG_PORT [--timeout S] [--probe] [--skip-db]
//       a CI build: serves, requests /checkout of itself once, exits 0 on 200, else 1; --probe: a
//       health query (SELECT 1, the simple protocol) on the same connection first, its time printed
//       ("probe: 0.001 s"); --skip-db: answers without asking the database
const { runCheckoutService, runMain } = require('./checkout-service');
const { Client } = require('pg');

const [mode, pgPort] = [process.argv[2], Number(process.argv[3])];
const flag = (name) => process.argv.indexOf(name);
const timeoutMs = flag('--timeout') > 0 ? Number(process.argv[flag('--timeout') + 1]) * 1000 : 5000;
const probe = flag('--probe') > 0;
const skipDb = flag('--skip-db') > 0;

async function main() {
  const db = new Client({
    host: '127.0.0.1',
    port: pgPort,
    user: 'postgres',
    database: 'postgres',
    query_timeout: timeoutMs,
  });
  db.on('error', (err) => process.stderr.write(`pg: ${err.message}\n`));
  await db.connect();
  await runCheckoutService({
    mode,
    portFile: process.argv[4],
    checkout: async () => {
      if (probe) {
        const start = process.hrtime.bigint();
        await db.query('SELECT 1');
        process.stderr.write(`probe: ${(Number(process.hrtime.bigint() - start) / 1e9).toFixed(3)} s\n`);
      }
      if (!skipDb) await db.query('SELECT total FROM orders WHERE id = $1', [42]);
    },
  });
}

runMain(main);
