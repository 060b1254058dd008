// A Node http2 server (h2c, or TLS when given cert and key) for the ground-truth tests: each
// stream writes <dir>/<id>.a on the loop, then <id>.b through libuv's pool, <id> its
// x-request-id (or "none"), then answers "ok". Args: dir [cert key]. Prints its port when it
// listens.
'use strict';
const fs = require('node:fs');
const http2 = require('node:http2');
const path = require('node:path');

const [dir, cert, key] = process.argv.slice(2);
const server = cert
  ? http2.createSecureServer({ cert: fs.readFileSync(cert), key: fs.readFileSync(key) })
  : http2.createServer();
server.on('stream', async (stream, headers) => {
  const rid = String(headers['x-request-id'] ?? 'none').replace(/[^A-Za-z0-9._-]/g, '_');
  fs.writeFileSync(path.join(dir, `${rid}.a`), `${rid}\n`);
  await fs.promises.writeFile(path.join(dir, `${rid}.b`), `${rid}\n`);
  stream.respond({ ':status': 200 });
  stream.end('ok\n');
});
server.listen(0, '127.0.0.1', () => process.stdout.write(`${server.address().port}\n`));
