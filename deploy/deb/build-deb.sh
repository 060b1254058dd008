#!/usr/bin/env bash
# build-deb.sh ROOT VERSION OUT: turns the tree `make install` laid out in ROOT (PREFIX=/usr)
# into a Debian package: stripped binaries, docs and man page, control data from the binaries'
# own shared-library needs (dpkg-shlibdeps), conffiles and the maintainer scripts beside this file.
set -euo pipefail
root=$(readlink -f "$1") version=$2 out=$3
here=$(dirname "$(readlink -f "$0")")
lib=$root/usr/lib/kreplay
doc=$root/usr/share/doc/kreplay
# reproducible: files and the changelog carry the commit's date, not the build's
export SOURCE_DATE_EPOCH=${SOURCE_DATE_EPOCH:-$(git log -1 --format=%ct 2>/dev/null || date +%s)}

# Node ships with debug info (~90 MiB of it); the addons and helpers need no symbols either
elves() { "$here/../elf-files.sh" "$lib"; }
for f in $(elves); do strip --strip-unneeded --remove-section=.comment "$f"; done

install -d "$doc" "$root/usr/share/man/man1" "$root/usr/share/lintian/overrides" "$root/DEBIAN"
install -m 0644 "$here/copyright" "$doc/copyright"
gzip -9n < CHANGELOG.md > "$doc/changelog.gz"
{
  printf 'kreplay (%s) unstable; urgency=medium\n\n' "$version"
  printf '  * Release %s: see /usr/share/doc/kreplay/changelog.gz.\n\n' "$version"
  printf ' -- kreplay maintainers <maintainers@kreplay.example.org>  %s\n' "$(date -u -R -d "@$SOURCE_DATE_EPOCH")"
} | gzip -9n > "$doc/changelog.Debian.gz"
"$here/manpage.sh" "$lib/bin/kreplay" "$version" | gzip -9n > "$root/usr/share/man/man1/kreplay.1.gz"
install -m 0644 "$here/lintian-overrides" "$root/usr/share/lintian/overrides/kreplay"
chmod 0644 "$doc"/* "$root/usr/share/man/man1/kreplay.1.gz"

# what the ELF files need, as Debian package names and versions (run where a debian/control is)
elves=$(elves)
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
mkdir "$work/debian"
printf 'Source: kreplay\n\nPackage: kreplay\nArchitecture: amd64\n' > "$work/debian/control"
# shellcheck disable=SC2086
# (its warnings: the addons' napi_* symbols come from Node itself, as for any plugin)
shlibs=$(cd "$work" && dpkg-shlibdeps -O --ignore-missing-info $(sed 's/^/-e/' <<< "$elves") 2>/dev/null | sed -n 's/^shlibs:Depends=//p')
[ -n "$shlibs" ] || { echo "build-deb: dpkg-shlibdeps found no dependencies" >&2; exit 1; }

install -m 0755 "$here/postinst" "$here/prerm" "$here/postrm" "$root/DEBIAN/"
(cd "$root" && find etc -type f | sed 's|^|/|' | sort) > "$root/DEBIAN/conffiles"
size=$(du -sk --exclude=DEBIAN "$root" | cut -f1)
sed -e "s/@VERSION@/$version/" -e "s/@SHLIBS@/$shlibs/" -e "s/@SIZE@/$size/" "$here/control.in" > "$root/DEBIAN/control"
(cd "$root" && find . -path ./DEBIAN -prune -o -type f -print0 | sort -z | xargs -0 md5sum | sed 's| \./| |') > "$root/DEBIAN/md5sums"
chmod 0644 "$root/DEBIAN/control" "$root/DEBIAN/conffiles" "$root/DEBIAN/md5sums"
find "$root" -exec touch --no-dereference -d "@$SOURCE_DATE_EPOCH" {} +
dpkg-deb --root-owner-group -Zxz -z1 --build "$root" "$out"
