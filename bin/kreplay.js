#!/usr/bin/env node
'use strict';
// The CLI is TypeScript compiled to dist/ by `make build`; bin/kreplay starts it on Node 24.
const path = require('node:path');
const fs = require('node:fs');
const major = Number(process.versions.node.split('.')[0]);
if (major < 24) {
  process.stderr.write(`kreplay: needs Node 24 or newer, this is ${process.version}; run bin/kreplay\n`);
  process.exit(1);
}
const main = path.join(__dirname, '..', 'dist', 'cli', 'main.js');
if (!fs.existsSync(main)) {
  process.stderr.write('kreplay: dist/cli/main.js is missing; run `make build` first\n');
  process.exit(1);
}
require(main).main(process.argv);
