// A Node https server for the TLS benchmark and tests: each request writes a
// file named by its x-request-id (or "none") in <dir> on the event loop (<id>.a) and one through
// libuv's threadpool (<id>.b, fs.promises), then answers "ok".
// Args: cert key dir. Prints its port when it listens.
'use strict';
const fs = require('node:fs');
const https = require('node:https');
const path = require('node:path');

const [cert, key, dir] = process.argv.slice(2);
const server = https.createServer({ cert: fs.readFileSync(cert), key: fs.readFileSync(key) }, (req, res) => {
  const rid = String(req.headers['x-request-id'] ?? 'none').replace(/[^A-Za-z0-9._-]/g, '_');
  fs.writeFileSync(path.join(dir, `${rid}.a`), `${rid}\n`);
  fs.promises.writeFile(path.join(dir, `${rid}.b`), `${rid}\n`).then(() => res.end('ok\n'));
});
server.listen(0, '127.0.0.1', () => process.stdout.write(`${server.address().port}\n`));
