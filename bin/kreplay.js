#!/usr/bin/env node
'use strict';
// The CLI is TypeScript compiled to dist/ by `make build`.
const path = require('node:path');
const fs = require('node:fs');
const main = path.join(__dirname, '..', 'dist', 'cli', 'main.js');
if (!fs.existsSync(main)) {
  process.stderr.write('kreplay: dist/cli/main.js is missing; run `make build` first\n');
  process.exit(1);
}
require(main).main(process.argv);
