#!/usr/bin/env bash
# elf-files.sh DIR: the ELF executables and shared objects under DIR, one path a line (what the
# package builds strip, hand to dpkg-shlibdeps, and read glibc symbol versions from).
set -euo pipefail
find "$1" -type f -print0 | xargs -0 file -N --mime-type |
  sed -n 's/: *application\/x-\(pie-executable\|executable\|sharedlib\)$//p'
