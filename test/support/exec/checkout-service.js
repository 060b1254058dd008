// The shape the Node test services share: GET /checkout runs the service's own work and answers
// 200 (with the body the work returns, else "ok"), or 502 (the error on stderr) when that work failed. `serve` writes the port to a file and
// serves until killed; `once` (a CI build; on `listenPort`, else any) requests /checkout of itself once and exits 0 on 200,
// else 1.
const http = require('node:http');
const fs = require('node:fs');

async function runCheckoutService({ mode, portFile, checkout, listenPort = 0 }) {
  const server = http.createServer(async (req, res) => {
    let status = 200;
    let body = 'ok\n';
    try {
      body = (await checkout()) ?? body;
    } catch (err) {
      status = 502;
      process.stderr.write(`checkout failed: ${err.message}\n`);
    }
    res.writeHead(status).end(status === 200 ? body : 'upstream\n');
  });
  await new Promise((resolve) => server.listen(listenPort, '127.0.0.1', resolve));
  const { port } = server.address();
  if (mode === 'serve') {
    fs.writeFileSync(portFile, `${port}\n`);
    return;
  }
  const status = await new Promise((resolve, reject) =>
    http
      .get({ host: '127.0.0.1', port, path: '/checkout' }, (res) =>
        res.resume().once('end', () => resolve(res.statusCode)),
      )
      .once('error', reject),
  );
  process.stdout.write(`checkout: ${status}\n`);
  process.exit(status === 200 ? 0 : 1);
}

function runMain(main) {
  main().catch((err) => {
    process.stderr.write(`${err.stack}\n`);
    process.exit(1);
  });
}

module.exports = { runCheckoutService, runMain };
