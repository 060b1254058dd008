// A timer a request leaves behind: the first request to /interval starts a setInterval that writes
// tick.<n> every few milliseconds for ever, and every request writes <x-request-id>.handler; /interval
// and /mark answer with the last n written.
// Usage: node node-interval-server.js DIR (prints its port).
'use strict';
const fs = require('node:fs');
const http = require('node:http');
const path = require('node:path');
const { setInterval } = require('node:timers');

const dir = process.argv[2];
let ticks = 0;
let timer;
const server = http.createServer((req, res) => {
  const id = req.headers['x-request-id'] ?? 'none';
  if (req.url === '/interval' && !timer)
    timer = setInterval(() => fs.writeFileSync(path.join(dir, `tick.${++ticks}`), 'tick\n'), 2);
  fs.writeFileSync(path.join(dir, `${id}.handler`), 'handler\n');
  res.end(String(ticks));
});
server.keepAliveTimeout = 60_000;
server.listen(0, '127.0.0.1', () => console.log(server.address().port));
