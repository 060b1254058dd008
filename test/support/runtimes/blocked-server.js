// A server whose main thread blocks in execSync as soon as it listens, until the file FILE exists:
// a SIGUSR1 meanwhile cannot open the inspector (neither V8 nor libuv gets to run) until it returns.
// Prints its port, then "unblocked". Usage: blocked-server.js FILE
'use strict';
const http = require('node:http');
const { execFileSync } = require('node:child_process');

const file = process.argv[2];
const server = http.createServer((_req, res) => res.end('ok'));
server.listen(0, '127.0.0.1', () => {
  console.log(server.address().port);
  execFileSync('/bin/sh', ['-c', 'while [ ! -e "$1" ]; do sleep 0.05; done', 'sh', file]);
  console.log('unblocked');
});
