#!/usr/bin/env bash
# A minimal Debian 12 root file system booting systemd, for the system tests (test/system/): built
# by mmdebstrap from the machine's apt sources, kept in $KREPLAY_ROOTFS_CACHE (default
# /var/cache/kreplay-test-rootfs) under a key of what goes in, so later runs take it as is.
#   rootfs.sh build    build it unless cached; print its directory
#   rootfs.sh path     print the directory it has (or would have)
#   rootfs.sh warm     exit 0 if it is cached
set -euo pipefail
cache=${KREPLAY_ROOTFS_CACHE:-/var/cache/kreplay-test-rootfs}
suite=bookworm
# systemd to boot, what the .deb depends on (so dpkg -i needs no network), curl to ask the daemon
packages=systemd,systemd-sysv,dbus,libbpf1,libelf1,zlib1g,libcapstone4,libstdc++6,libgcc-s1,procps,curl
sources=(/etc/apt/sources.list.d/*.sources)
key=$( { echo "$suite $packages"; cat "${sources[@]}" "$0"; } | sha256sum | cut -c1-16)
dir=$cache/$suite-$key

case ${1:-} in
  path) echo "$dir" ;;
  warm) [ -e "$dir/.complete" ] ;;
  build)
    if [ ! -e "$dir/.complete" ]; then
      rm -rf "$dir" "$dir.tmp"
      mkdir -p "$cache"
      mirrors=()
      for file in "${sources[@]}"; do mirrors+=("$file"); done
      mmdebstrap --quiet --variant=minbase --include="$packages" "$suite" "$dir.tmp" "${mirrors[@]}" >&2
      # the container's name for itself; root may log in on the console (tests use machinectl-less shells)
      echo kreplay-test > "$dir.tmp/etc/hostname"
      touch "$dir.tmp/.complete"
      mv "$dir.tmp" "$dir"
      # older keys of this cache are stale
      find "$cache" -mindepth 1 -maxdepth 1 -name "$suite-*" ! -name "$suite-$key" -exec rm -rf {} +
    fi
    echo "$dir"
    ;;
  *) echo "usage: $0 build|path|warm" >&2; exit 2 ;;
esac
