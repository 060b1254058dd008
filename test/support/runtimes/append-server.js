// The server-cost benchmark's Node http server (bench/server-cost.ts): each request appends a line
// to one file and is answered, over keep-alive connections.
// Usage: node append-server.js FILE (prints its port).
'use strict';
const fs = require('node:fs');
const http = require('node:http');

const fd = fs.openSync(process.argv[2], 'a');
const server = http.createServer((_req, res) => {
  fs.write(fd, 'a request\n', (err) => {
    if (err) throw err;
    res.end('ok\n');
  });
});
server.keepAliveTimeout = 60_000;
server.listen(0, '127.0.0.1', () => console.log(server.address().port));
