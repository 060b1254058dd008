// An event-loop HTTP server for attribution accuracy: GET /<size> logs one
// line of exactly <size> bytes holding the request's x-request-id (the
// ground truth), after a turn of the event loop as handlers that await
// something do, then answers. Prints its port.
const http = require('node:http');
const fs = require('node:fs');
const { setImmediate } = require('node:timers');

const fd = fs.openSync(process.argv[2], 'a');
const server = http.createServer((req, res) => {
  const size = Number(req.url.slice(1));
  const line = Buffer.alloc(size, 46);
  line.write(`${req.headers['x-request-id']} `);
  setImmediate(() => {
    fs.writeSync(fd, line);
    res.end('ok');
  });
});
server.keepAliveTimeout = 60000;
server.listen(0, '127.0.0.1', () => console.log(server.address().port));
