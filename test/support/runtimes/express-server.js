// An express app (npm express, unmodified kreplay-wise) for Node attribution: POST /orders parses
// the JSON body (express.json reads it in the connection's callbacks), waits 0-10 ms, writes the
// order through libuv's pool (fs.promises) and on the loop (writeFileSync), in files named by the
// request's x-request-id, and answers. Usage: express-server.js DIR. Prints its port.
'use strict';
const express = require('express');
const fs = require('node:fs');
const { join } = require('node:path');
const { setTimeout } = require('node:timers/promises');

const dir = process.argv[2];
const app = express();
app.post('/orders', express.json(), async (req, res) => {
  const id = req.get('x-request-id');
  await setTimeout(Math.random() * 10);
  await fs.promises.writeFile(join(dir, `${id}.pool`), JSON.stringify(req.body));
  fs.writeFileSync(join(dir, `${id}.loop`), 'stored\n');
  res.json({ stored: req.body.item });
});
const server = app.listen(0, '127.0.0.1', () => console.log(server.address().port));
server.keepAliveTimeout = 60000;
