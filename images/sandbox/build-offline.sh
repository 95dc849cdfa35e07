#!/usr/bin/env bash
# Offline build of the sandbox image, for air-gapped sites: a Debian root filesystem made by
# debootstrap (minbase) from the configured Debian mirror, finished by rootfs-setup.sh, then
# `docker import`. No image registry is involved.
#   usage: build-offline.sh TAG   (run as root; needs debootstrap and a Docker engine)
#   LEMNISCATE_DEBIAN_MIRROR overrides the mirror taken from the host's apt sources (debian-mirror.sh).
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
tag=${1:?usage: build-offline.sh TAG}
. "$here/debian-mirror.sh"

# debootstrap's own resolver cannot configure Debian's npm (hundreds of node-* packages) in its
# first stage, so npm is installed with apt inside the new root filesystem afterwards.
all=$(grep -v '^#' "$here/packages.txt" | grep -v '^[[:space:]]*$')
packages=$(echo "$all" | grep -vx npm | paste -sd, -)
second=$(echo "$all" | grep -x npm || true)
work=$(mktemp -d /var/tmp/lemniscate-rootfs.XXXXXX)
trap 'rm -rf "$work"' EXIT

echo "debootstrap $suite (minbase + $packages) from $mirror"
minbase "$work/rootfs" "$work/debootstrap.log" "$packages"
if [ -n "$second" ]; then
  echo "apt-get install $second (inside the new root filesystem)"
  echo "deb $mirror $suite main" > "$work/rootfs/etc/apt/sources.list"
  mount -t proc proc "$work/rootfs/proc"
  trap 'umount "$work/rootfs/proc" 2>/dev/null || true; rm -rf "$work"' EXIT
  chroot "$work/rootfs" sh -c "apt-get update -q && DEBIAN_FRONTEND=noninteractive apt-get install -y -q --no-install-recommends $second" > "$work/apt.log" 2>&1 || {
    tail -n 30 "$work/apt.log" >&2; echo "installing $second inside the image failed." >&2; exit 1; }
  umount "$work/rootfs/proc"
  rm -f "$work/rootfs/etc/apt/sources.list"
fi
# The seccomp loader and the command runner are compiled here, static, so the image carries no
# compiler (ADR 0008, 0016).
command -v gcc > /dev/null || { echo "gcc is needed to build the sandbox's seccomp loader and runner: apt-get install gcc libc6-dev." >&2; exit 1; }
gcc -O2 -static -Wall -Wextra -Werror -o "$work/seccomp-load" "$here/seccomp-load.c"
gcc -O2 -static -Wall -Wextra -Werror -o "$work/sandbox-runner" "$here/sandbox-runner.c"
sh "$here/rootfs-setup.sh" "$work/rootfs" "$work/seccomp-load" "$work/sandbox-runner"

tar -C "$work/rootfs" --numeric-owner -c . | docker import \
  --change 'USER 10001:10001' \
  --change 'WORKDIR /workspace' \
  --change 'ENV HOME=/home/sandbox' \
  --change 'ENV LANG=C.UTF-8' \
  --change 'ENV PATH=/usr/local/bin:/usr/bin:/bin' \
  --change 'CMD ["sleep", "infinity"]' \
  --change "LABEL org.opencontainers.image.title=lemniscate-sandbox" \
  - "$tag" > /dev/null
echo "imported $tag"
