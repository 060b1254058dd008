// A Node server that, once told to go (a line on stdin), closes every descriptor above stdio that
// is a file or /dev/null (what a program that cleans up inherited descriptors does), then opens
// files f0, f1, ... until every number up to the highest it closed is its own again, and writes
// them while it serves. GET /w/<id>: a line in each file, and another after a turn of the loop;
// GET /quit: closes them and exits 0. It listens from the start; it prints its port once its
// files are open.
// Usage: fd-reuse-server.js DIR
'use strict';
const fs = require('node:fs');
const http = require('node:http');
const path = require('node:path');
const { setImmediate } = require('node:timers');

const dir = process.argv[2];
const files = [];
const server = http.createServer((req, res) => {
  if (req.url === '/quit') {
    res.end('bye', () => {
      for (const fd of files) fs.closeSync(fd);
      process.exit(0);
    });
    return;
  }
  for (const fd of files) fs.writeSync(fd, `${req.url}\n`);
  setImmediate(() => {
    for (const fd of files) fs.writeSync(fd, `${req.url} later\n`);
    res.end('ok');
  });
});
server.listen(0, '127.0.0.1', () => {
  process.stdin.once('data', () => {
    process.stdin.destroy();
    let highest = 2;
    for (const name of fs.readdirSync('/proc/self/fd')) {
      const fd = Number(name);
      let target;
      try {
        target = fs.readlinkSync(`/proc/self/fd/${fd}`);
      } catch {
        continue;
      }
      if (fd > 2 && (target === '/dev/null' || (target.startsWith('/') && fs.fstatSync(fd).isFile()))) {
        fs.closeSync(fd);
        highest = Math.max(highest, fd);
      }
    }
    do files.push(fs.openSync(path.join(dir, `f${files.length}`), 'a'));
    while (files.at(-1) < highest);
    console.log(server.address().port);
  });
});
