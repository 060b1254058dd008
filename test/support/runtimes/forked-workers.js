// jest-like: a parent that forks short-lived workers (child_process.fork), 3 at a time, 9 in all,
// each busy for 2.5 s in synchronous slices of 20 ms, then gone. The parent prints "forking",
// each worker's pid, then "done", and stays. Usage: forked-workers.js
'use strict';
const { fork } = require('node:child_process');
const { setImmediate, setInterval } = require('node:timers');

const WORKERS = 9;
const AT_ONCE = 3;

if (process.argv[2] === 'worker') {
  const end = Date.now() + 2500;
  const slice = () => {
    const until = Date.now() + 20;
    while (Date.now() < until);
    if (Date.now() < end) setImmediate(slice);
    else process.exit(0);
  };
  slice();
} else {
  let started = 0;
  let running = 0;
  const more = () => {
    while (running < AT_ONCE && started < WORKERS) {
      started++;
      running++;
      const worker = fork(process.argv[1], ['worker']);
      console.log(worker.pid);
      worker.once('exit', () => {
        running--;
        if (started === WORKERS && running === 0) console.log('done');
        else more();
      });
    }
  };
  console.log('forking');
  more();
  setInterval(() => {}, 1000);
}
