#!/usr/bin/env bash
# build-image.sh TARBALL IMAGE: the OCI image IMAGE of kreplay (Containerfile beside this), from
# the relocatable TARBALL (`make dist`) and a Debian minbase rootfs (test/system/rootfs.sh, cached
# by its package set), with podman and no registry (FROM scratch).
set -euo pipefail
here=$(dirname "$(readlink -f "$0")")
tarball=$1 image=$2
# the tarball needs glibc and libstdc++ (Node's); minbase has the first
rootfs=$("$here/../../test/system/rootfs.sh" build image libstdc++6)
context=$(mktemp -d)
trap 'rm -rf "$context"' EXIT
tar -C "$rootfs" --exclude=./.complete -cf "$context/rootfs.tar" .
cp "$tarball" "$context/kreplay.tar.gz"
podman build --quiet --network=none --pull=never -f "$here/Containerfile" -t "$image" "$context"
echo "image: $image"
