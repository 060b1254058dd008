// An event-loop HTTP server (Node http) that holds a request: GET /hold/<size> is kept unanswered,
// GET /held answers how many are held, and GET /release/<size> first writes each held request's
// line (exactly <size> bytes holding its x-request-id) and answers it, then writes and answers its
// own: the writes of a request whose head came before the release's, made right after the
// release's head was read. Prints its port.
const http = require('node:http');
const fs = require('node:fs');

const fd = fs.openSync(process.argv[2], 'a');
const held = [];
const line = (req, size) => {
  const bytes = Buffer.alloc(size, 46);
  bytes.write(`${req.headers['x-request-id']} `);
  return bytes;
};
const server = http.createServer((req, res) => {
  const [, verb, size] = req.url.split('/');
  if (verb === 'hold')
    return void held.push(() => (fs.writeSync(fd, line(req, Number(size))), res.end('ok')));
  if (verb === 'held') return void res.end(String(held.length));
  for (const answer of held.splice(0)) answer();
  fs.writeSync(fd, line(req, Number(size)));
  res.end('ok');
});
server.listen(0, '127.0.0.1', () => console.log(server.address().port));
