// The Node scenario (node-server.js) in a cluster of two workers, the primary sharing the port.
// Usage: cluster-server.js DIR UPSTREAM_PORT. Each worker prints the port.
'use strict';
const cluster = require('node:cluster');

if (cluster.isPrimary) {
  for (let i = 0; i < 2; i++) cluster.fork();
} else {
  require('./node-server.js');
}
