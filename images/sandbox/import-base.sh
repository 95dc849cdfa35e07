#!/usr/bin/env bash
# A Debian bookworm base image imported offline, the stand-in for debian:bookworm-slim where no image
# registry can be reached: a minbase root filesystem made by debootstrap from the configured Debian
# mirror (the same mirror and package cache as build-offline.sh), then `docker import`. Its apt
# sources name that mirror, so the Dockerfile's RUN steps install from it:
#   import-base.sh TAG && docker build --build-arg BASE=TAG -f images/sandbox/Dockerfile images/sandbox
#   usage: import-base.sh TAG   (run as root; needs debootstrap and a Docker engine)
#   LEMNISCATE_DEBIAN_MIRROR overrides the mirror taken from the host's apt sources (debian-mirror.sh).
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
tag=${1:?usage: import-base.sh TAG}
. "$here/debian-mirror.sh"

work=$(mktemp -d /var/tmp/lemniscate-base.XXXXXX)
trap 'rm -rf "$work"' EXIT

echo "debootstrap $suite (minbase) from $mirror"
minbase "$work/rootfs" "$work/debootstrap.log"
root=$work/rootfs
# The suite build-offline.sh installs from, and nothing else: the Dockerfile route then gets the
# same package versions as the offline route.
echo "deb $mirror $suite main" > "$root/etc/apt/sources.list"

# What Debian's own container images (debuerreotype, -slim variant) add to a minbase root filesystem,
# so the Dockerfile's RUN steps behave here as they do on debian:bookworm-slim: no service starts
# during a build, dpkg does not sync after every file (a build that dies is restarted from scratch),
# apt keeps no package cache nor translations, and documentation, manuals and translations are
# neither installed nor kept (copyright files excepted).
printf '#!/bin/sh\n# No service starts inside an image build.\nexit 101\n' > "$root/usr/sbin/policy-rc.d"
chmod 0755 "$root/usr/sbin/policy-rc.d"
echo 'force-unsafe-io' > "$root/etc/dpkg/dpkg.cfg.d/docker-apt-speedup"
cat > "$root/etc/apt/apt.conf.d/docker-clean" <<'APT'
DPkg::Post-Invoke { "rm -f /var/cache/apt/archives/*.deb /var/cache/apt/archives/partial/*.deb /var/cache/apt/*.bin || true"; };
APT::Update::Post-Invoke { "rm -f /var/cache/apt/archives/*.deb /var/cache/apt/archives/partial/*.deb /var/cache/apt/*.bin || true"; };
Dir::Cache::pkgcache "";
Dir::Cache::srcpkgcache "";
APT
echo 'Acquire::Languages "none";' > "$root/etc/apt/apt.conf.d/docker-no-languages"
slim=(/usr/share/doc /usr/share/groff /usr/share/info /usr/share/linda /usr/share/lintian/overrides /usr/share/locale /usr/share/man)
{
  for d in "${slim[@]}"; do echo "path-exclude $d/*"; done
  echo 'path-include /usr/share/doc/*/copyright'
} > "$root/etc/dpkg/dpkg.cfg.d/docker"
for d in "${slim[@]}"; do
  [ -d "$root$d" ] || continue
  find "$root$d" -depth -mindepth 1 ! -type d ! -path "$root/usr/share/doc/*/copyright" -delete
  find "$root$d" -depth -mindepth 1 -type d -empty -delete
done
rm -rf "$root/var/cache/apt/archives"/*.deb "$root/var/lib/apt/lists"/*

# The configuration debian:bookworm-slim has, so the Dockerfile's ENV and CMD apply over the same one.
tar -C "$root" --numeric-owner -c . | docker import \
  --change 'ENV PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin' \
  --change 'CMD ["bash"]' \
  - "$tag" > /dev/null
echo "imported $tag"
