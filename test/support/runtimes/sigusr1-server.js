// A Node server with its own SIGUSR1 listener (a log reopen, say): SIGUSR1 is the application's
// here, and Node's inspector no longer opens on it. It writes DIR/signalled if it ever gets one,
// and each request writes a file named by its x-request-id. Usage: sigusr1-server.js DIR.
'use strict';
const fs = require('node:fs');
const http = require('node:http');
const { join } = require('node:path');

const dir = process.argv[2];
process.on('SIGUSR1', () => fs.writeFileSync(join(dir, 'signalled'), 'SIGUSR1\n'));
const server = http.createServer(async (req, res) => {
  const id = req.headers['x-request-id'];
  await fs.promises.writeFile(join(dir, `${id}.pool`), 'x');
  res.end('ok');
});
server.listen(0, '127.0.0.1', () => console.log(server.address().port));
