#!/usr/bin/env bash
# build-dist.sh STAGE OUT: STAGE/kreplay holds the runtime tree; this makes it run from wherever
# it is extracted, by any user, with nothing installed but glibc: the shared libraries the addon
# needs beyond glibc and libstdc++ (which Node itself needs) go in kreplay/lib, found through
# $ORIGIN, and the file GLIBC names the oldest glibc every binary in it accepts.
set -euo pipefail
here=$(dirname "$(readlink -f "$0")")
stage=$1 out=$2
tree=$stage/kreplay
addon=$tree/native/build/Release/kreplay_native.node
export SOURCE_DATE_EPOCH=${SOURCE_DATE_EPOCH:-$(git log -1 --format=%ct 2>/dev/null || date +%s)}

elves() { "$here/../elf-files.sh" "$tree"; }

for f in $(elves); do strip --strip-unneeded --remove-section=.comment "$f"; done

# libbpf and what it links (libelf, zlib), capstone (the Go probes' disassembler), and libdw (the Go
# runtime's layouts from DWARF) with what it links (liblzma, libbz2): copied from where the addon
# resolves them now
install -d "$tree/lib"
for soname in libbpf.so.1 libelf.so.1 libz.so.1 libcapstone.so.4 libdw.so.1 liblzma.so.5 libbz2.so.1.0; do
  path=$(ldd "$addon" | awk -v so="$soname" '$1 == so { print $3 }')
  [ -n "$path" ] || { echo "build-dist: $addon does not link $soname" >&2; exit 1; }
  install -m 0644 "$(readlink -f "$path")" "$tree/lib/$soname"
  patchelf --set-rpath '$ORIGIN' "$tree/lib/$soname"
done
patchelf --set-rpath '$ORIGIN/../../../lib' "$addon"

# the newest GLIBC_x.y symbol version any binary asks for is the oldest glibc it runs on
glibc=$(for f in $(elves); do objdump -T "$f"; done | grep -o 'GLIBC_[0-9][0-9.]*' | sed 's/GLIBC_//' | sort -uV | tail -1)
echo "$glibc" > "$tree/GLIBC"

find "$tree" -exec touch --no-dereference -d "@$SOURCE_DATE_EPOCH" {} +
tar --sort=name --owner=0 --group=0 --numeric-owner --mtime="@$SOURCE_DATE_EPOCH" -C "$stage" -czf "$out" kreplay
echo "dist: $out ($(du -h "$out" | cut -f1)), needs glibc $glibc or later"
