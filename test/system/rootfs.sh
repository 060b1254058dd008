#!/usr/bin/env bash
# A minimal Debian 12 root file system for the tests: by default one booting systemd, for the system
# tests (test/system/); with NAME and PACKAGES, another package set (the container images of
# test/support/podman.ts). Built by mmdebstrap from the machine's apt sources, kept in
# $KREPLAY_ROOTFS_CACHE (default /var/cache/kreplay-test-rootfs) under a key of what goes in, so
# later runs take it as is.
#   rootfs.sh build [NAME PACKAGES]    build it unless cached; print its directory
#   rootfs.sh path [NAME PACKAGES]     print the directory it has (or would have)
#   rootfs.sh warm [NAME PACKAGES]     exit 0 if it is cached
# PACKAGES is mmdebstrap's --include list (comma-separated), over --variant=minbase.
set -euo pipefail
cache=${KREPLAY_ROOTFS_CACHE:-/var/cache/kreplay-test-rootfs}
suite=bookworm
# systemd to boot, what the .deb depends on (so dpkg -i needs no network), curl to ask the daemon
name=${2:-systemd}
packages=${3:-systemd,systemd-sysv,dbus,libbpf1,libelf1,libdw1,zlib1g,libcapstone4,libstdc++6,libgcc-s1,procps,curl}
[[ $name =~ ^[a-z0-9-]+$ ]] || { echo "$0: bad rootfs name '$name' (a-z, 0-9, -)" >&2; exit 2; }
sources=(/etc/apt/sources.list.d/*.sources)
key=$( { echo "$suite $packages"; cat "${sources[@]}" "$0"; } | sha256sum | cut -c1-16)
dir=$cache/$suite-$name-$key

case ${1:-} in
  path) echo "$dir" ;;
  warm) [ -e "$dir/.complete" ] ;;
  build)
    if [ ! -e "$dir/.complete" ]; then
      mkdir -p "$cache"
      # one build per directory at a time (two test files may want the same rootfs at once)
      exec 9>"$dir.lock"
      flock 9
      if [ ! -e "$dir/.complete" ]; then
        rm -rf "$dir" "$dir.tmp"
        mirrors=()
        for file in "${sources[@]}"; do mirrors+=("$file"); done
        mmdebstrap --quiet --variant=minbase --include="$packages" "$suite" "$dir.tmp" "${mirrors[@]}" >&2
        # the container's name for itself
        echo kreplay-test > "$dir.tmp/etc/hostname"
        touch "$dir.tmp/.complete"
        mv "$dir.tmp" "$dir"
        # older keys of this name are stale
        find "$cache" -mindepth 1 -maxdepth 1 -name "$suite-$name-*" ! -name "$suite-$name-$key*" -exec rm -rf {} +
      fi
    fi
    echo "$dir"
    ;;
  *) echo "usage: $0 build|path|warm [NAME PACKAGES]" >&2; exit 2 ;;
esac
