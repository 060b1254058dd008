// A realistic Node `http` handler for attribution accuracy: it waits 0-20 ms (setTimeout), calls an
// upstream through a keep-alive agent, then writes two files whose names carry the request's
// x-request-id (fs.promises.appendFile on libuv's pool, fs.writeFileSync on the loop) and answers.
// Unmodified kreplay-wise: nothing here knows of kreplay.
// Usage: node-server.js DIR UPSTREAM_PORT [PORT [HOST]] (default: a free port on 127.0.0.1)
const http = require('node:http');
const fs = require('node:fs');
const { join } = require('node:path');
const { setTimeout } = require('node:timers');

const [dir, upstreamPort] = [process.argv[2], Number(process.argv[3])];
const agent = new http.Agent({ keepAlive: true, maxSockets: 16 });
const upstream = () =>
  new Promise((resolve, reject) =>
    http
      .get({ host: '127.0.0.1', port: upstreamPort, path: '/', agent }, (res) =>
        res.resume().once('end', resolve),
      )
      .once('error', reject),
  );

const server = http.createServer(async (req, res) => {
  const id = req.headers['x-request-id'];
  await new Promise((resolve) => setTimeout(resolve, Math.random() * 20));
  await upstream();
  await fs.promises.appendFile(join(dir, `${id}.pool`), 'appended by the pool\n');
  fs.writeFileSync(join(dir, `${id}.loop`), 'written on the loop\n');
  res.end('ok');
});
server.keepAliveTimeout = 60000;
server.listen(Number(process.argv[4] ?? 0), process.argv[5] ?? '127.0.0.1', () =>
  console.log(server.address().port),
);
