// A gRPC server on @grpc/grpc-js (npm), h2c, for the ground-truth tests: Unary waits 0-10 ms and
// writes <dir>/<id>.u through libuv's pool; Stream sends four messages, writing <id>.s<i> before
// each (on the loop for even i, through the pool for odd i). <id> is the call's x-request-id
// metadata. Messages are raw bytes (no protobuf): the service is defined by hand. Args: dir.
// Prints its port when it listens.
'use strict';
const fs = require('node:fs');
const path = require('node:path');
const { setTimeout } = require('node:timers/promises');
const grpc = require('@grpc/grpc-js');

const dir = process.argv[2];
const bytes = { serialize: (b) => b, deserialize: (b) => b };
const method = (name, responseStream) => ({
  path: `/kreplay.Files/${name}`,
  requestStream: false,
  responseStream,
  requestSerialize: bytes.serialize,
  requestDeserialize: bytes.deserialize,
  responseSerialize: bytes.serialize,
  responseDeserialize: bytes.deserialize,
});
const idOf = (call) =>
  String(call.metadata.get('x-request-id')[0] ?? 'none').replace(/[^A-Za-z0-9._-]/g, '_');

const server = new grpc.Server();
server.addService(
  { Unary: method('Unary', false), Stream: method('Stream', true) },
  {
    async Unary(call, callback) {
      const id = idOf(call);
      await setTimeout(Math.random() * 10);
      await fs.promises.writeFile(path.join(dir, `${id}.u`), `${id}\n`);
      callback(null, Buffer.from('ok'));
    },
    async Stream(call) {
      const id = idOf(call);
      for (let i = 0; i < 4; i++) {
        const file = path.join(dir, `${id}.s${i}`);
        if (i % 2 === 0) fs.writeFileSync(file, `${id}\n`);
        else await fs.promises.writeFile(file, `${id}\n`);
        call.write(Buffer.from(`part ${i}`));
        await setTimeout(1);
      }
      call.end();
    },
  },
);
server.bindAsync('127.0.0.1:0', grpc.ServerCredentials.createInsecure(), (err, port) => {
  if (err) throw err;
  process.stdout.write(`${port}\n`);
});
