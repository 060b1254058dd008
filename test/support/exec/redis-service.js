// An ordinary Node service: node:http, Redis through the npm `redis` client (one client per
// process, connected at start as services do), and a file it appends the order to and fsyncs.
// GET /checkout reads the cart (GET cart:42); it answers 200, or 502 when Redis failed or took
// longer than the service's timeout. Nothing here knows of kreplay.
//
//   redis-service.js serve REDIS_PORT OUT PORT_FILE   production: serves until killed
//   redis-service.js once REDIS_PORT OUT [--timeout S] [--skip-redis]
//       a CI build: serves, requests /checkout of itself once, exits 0 on 200, else 1
const fs = require('node:fs');
const { runCheckoutService, runMain } = require('./checkout-service');
const { setTimeout, clearTimeout } = require('node:timers');
const { createClient } = require('redis');

const [mode, redisPort, out] = [process.argv[2], Number(process.argv[3]), process.argv[4]];
const flag = (name) => process.argv.indexOf(name);
const timeoutMs = flag('--timeout') > 0 ? Number(process.argv[flag('--timeout') + 1]) * 1000 : 5000;
const skipRedis = flag('--skip-redis') > 0;

/** The cart, or a rejection once the service's timeout passes. */
function cart(client) {
  let timer;
  const late = new Promise((_, reject) => {
    timer = setTimeout(() => reject(new Error(`Redis took over ${timeoutMs} ms`)), timeoutMs);
  });
  return Promise.race([client.get('cart:42'), late]).finally(() => clearTimeout(timer));
}

async function main() {
  const client = createClient({
    url: `redis://127.0.0.1:${redisPort}`,
    socket: { reconnectStrategy: false },
  });
  client.on('error', (err) => process.stderr.write(`redis: ${err.message}\n`));
  await client.connect();
  await runCheckoutService({
    mode,
    portFile: process.argv[5],
    checkout: async () => {
      const got = skipRedis ? '' : ((await cart(client)) ?? '');
      const fd = fs.openSync(out, 'a');
      fs.writeSync(fd, `order ${got}\n`);
      fs.fsyncSync(fd);
      fs.closeSync(fd);
    },
  });
}

runMain(main);
