'use strict';
/**
 * A process for attribution tests: writes known sizes before, during and
 * after a KREPLAY-CTX marker, from its main thread, a thread it starts and a
 * process it forks. Sizes tell the phases apart:
 *   7 before the marker, 1000+i after it, 2000+i from the thread,
 *   3000+i from the child process, 4000+i after the clearing marker.
 * usage: node writer-child.js FILE TXN TRACE N
 */
const fs = require('node:fs');
const { Worker } = require('node:worker_threads');
const { spawnSync } = require('node:child_process');

const [file, txn, trace, n] = process.argv.slice(2);
const fd = fs.openSync(file, 'a');
const devNull = fs.openSync('/dev/null', 'w');
const writeSizes = (base, count) => {
  for (let i = 0; i < count; i++) fs.writeSync(fd, Buffer.alloc(base + i, 120));
};

writeSizes(7, 1);
writeSizes(7, 1);
writeSizes(7, 1);
fs.writeSync(devNull, `KREPLAY-CTX txn=${txn} trace=${trace}\n`);
writeSizes(1000, Number(n));
const thread = new Worker(
  `const fs = require('node:fs'); const fd = fs.openSync(${JSON.stringify(file)}, 'a');
   for (let i = 0; i < 5; i++) fs.writeSync(fd, Buffer.alloc(2000 + i, 120));`,
  { eval: true },
);
thread.on('exit', () => {
  const child = spawnSync(process.execPath, [
    '-e',
    `const fs = require('node:fs'); const fd = fs.openSync(${JSON.stringify(file)}, 'a');
     for (let i = 0; i < 3; i++) fs.writeSync(fd, Buffer.alloc(3000 + i, 120));`,
  ]);
  if (child.status !== 0) throw new Error(`child failed: ${child.stderr}`);
  fs.writeSync(devNull, 'KREPLAY-CTX\n');
  writeSizes(4000, 3);
  process.stdout.write(JSON.stringify({ pid: process.pid, childPid: child.pid }) + '\n');
});
