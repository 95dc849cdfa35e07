#!/usr/bin/env bash
# Offline build of the platform image: one Debian root filesystem (debootstrap minbase from the
# configured Debian mirror) with the gateway, the exec-host, the CLI and the built console, the build
# host's Node.js binary, PostgreSQL 15 and nginx (for the compose deployment), then `docker import`.
# No image registry is involved.
#   usage: build-offline.sh TAG STAGING   (run as root; STAGING: the built repository, see scripts/lib/platform-image.mjs)
#   LEMNISCATE_DEBIAN_MIRROR overrides the mirror taken from the host's apt sources.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
tag=${1:?usage: build-offline.sh TAG STAGING}
staging=${2:?usage: build-offline.sh TAG STAGING}
suite=bookworm

mirror=${LEMNISCATE_DEBIAN_MIRROR:-}
if [ -z "$mirror" ]; then
  mirror=$(sed -n 's/^URIs:[[:space:]]*//p' /etc/apt/sources.list.d/*.sources 2>/dev/null | awk '$1 !~ /security/ {print $1; exit}')
fi
if [ -z "$mirror" ] && [ -f /etc/apt/sources.list ]; then
  mirror=$(awk '$1=="deb" && $2 !~ /security/ {print $2; exit}' /etc/apt/sources.list)
fi
mirror=${mirror:-http://deb.debian.org/debian}

packages=$(grep -v '^#' "$here/packages.txt" | grep -v '^[[:space:]]*$' | paste -sd, -)
work=$(mktemp -d /var/tmp/lemniscate-platform.XXXXXX)
trap 'rm -rf "$work"' EXIT
cache=/var/cache/lemniscate/debootstrap
mkdir -p "$cache"

echo "debootstrap $suite (minbase + $packages) from $mirror"
debootstrap --variant=minbase --cache-dir="$cache" --include="$packages" "$suite" "$work/rootfs" "$mirror" > "$work/debootstrap.log" 2>&1 || {
  tail -n 30 "$work/debootstrap.log" >&2
  echo "debootstrap failed: the Debian mirror $mirror must be reachable (set LEMNISCATE_DEBIAN_MIRROR to a local mirror on an air-gapped host)." >&2
  exit 1
}
root=$work/rootfs
# Node.js: the binary this host runs the platform with (same major version as the tests).
install -m 0755 "$(readlink -f "$(command -v node)")" "$root/usr/local/bin/node"
mkdir -p "$root/opt/lemniscate"
cp -a "$staging/." "$root/opt/lemniscate/"
# Owned by root and readable by all: the processes read their code, never write it.
chown -R 0:0 "$root/opt/lemniscate"
chmod -R u=rwX,go=rX "$root/opt/lemniscate"
ln -sf /opt/lemniscate/apps/cli/bin/lemni.js "$root/usr/local/bin/lemni"
install -m 0755 "$here/entrypoint-postgres.sh" "$root/usr/local/bin/lemniscate-postgres"
# The processes run as this user unless a deployment says otherwise (the exec-host needs root: ADR 0010).
grep -q '^lemniscate:' "$root/etc/passwd" || echo 'lemniscate:x:10100:10100:Lemniscate:/var/lib/lemniscate:/usr/sbin/nologin' >> "$root/etc/passwd"
grep -q '^lemniscate:' "$root/etc/group" || echo 'lemniscate:x:10100:' >> "$root/etc/group"
mkdir -p "$root/var/lib/lemniscate" && chown 10100:10100 "$root/var/lib/lemniscate"
# nginx's own default site and pid handling are replaced by the deployment's configuration.
rm -f "$root/etc/nginx/sites-enabled/default"
# PostgreSQL runs with jit=off (lemniscate-postgres): its JIT provider and the LLVM it loads (~160 MB)
# are not shipped. Nor are message translations, locale sources, or the cluster Debian's postinst made
# (the compose deployment's database lives in its own volume).
rm -rf "$root/usr/lib/postgresql/15/lib/llvmjit.so" "$root/usr/lib/postgresql/15/lib/llvmjit_types.bc" "$root/usr/lib/postgresql/15/lib/bitcode"
rm -f "$root"/usr/lib/x86_64-linux-gnu/libLLVM-*.so* "$root"/usr/lib/x86_64-linux-gnu/libz3.so*
rm -rf "$root/var/lib/postgresql/15" "$root/etc/postgresql/15" "$root/usr/share/locale"/* "$root/usr/share/i18n"
chroot "$root" /sbin/ldconfig
rm -rf "$root/var/cache/apt/archives"/*.deb "$root/var/lib/apt/lists"/* "$root/usr/share/doc"/* "$root/usr/share/man"/*

tar -C "$root" --numeric-owner -c . | docker import \
  --change 'WORKDIR /opt/lemniscate' \
  --change 'ENV LANG=C.UTF-8' \
  --change 'ENV PATH=/usr/local/bin:/usr/bin:/bin:/usr/sbin:/sbin' \
  --change 'ENV NODE_ENV=production' \
  --change 'USER 10100:10100' \
  --change 'CMD ["node", "apps/gateway/bin/lemni-gateway.js"]' \
  --change "LABEL org.opencontainers.image.title=lemniscate-platform" \
  - "$tag" > /dev/null
echo "imported $tag"
