# Sourced by build-offline.sh and import-base.sh, so both debootstrap runs read the same Debian
# suite from the same mirror and share one package cache (a second run downloads nothing new).
#   LEMNISCATE_DEBIAN_MIRROR overrides the mirror taken from the host's apt sources.
suite=bookworm
cache=/var/cache/lemniscate/debootstrap

mirror=${LEMNISCATE_DEBIAN_MIRROR:-}
if [ -z "$mirror" ]; then
  mirror=$(sed -n 's/^URIs:[[:space:]]*//p' /etc/apt/sources.list.d/*.sources 2>/dev/null | awk '$1 !~ /security/ {print $1; exit}')
fi
if [ -z "$mirror" ] && [ -f /etc/apt/sources.list ]; then
  mirror=$(awk '$1=="deb" && $2 !~ /security/ {print $2; exit}' /etc/apt/sources.list)
fi
mirror=${mirror:-http://deb.debian.org/debian}

# usage: minbase ROOTFS LOG [PACKAGE,PACKAGE…]
# A minbase root filesystem of $suite in ROOTFS, with the packages given (and their dependencies);
# debootstrap's output goes to LOG and its last lines are shown when it fails.
minbase() {
  mkdir -p "$cache"
  debootstrap --variant=minbase --cache-dir="$cache" ${3:+--include="$3"} "$suite" "$1" "$mirror" > "$2" 2>&1 || {
    tail -n 30 "$2" >&2
    echo "debootstrap failed: the Debian mirror $mirror must be reachable (set LEMNISCATE_DEBIAN_MIRROR to a local mirror on an air-gapped host)." >&2
    exit 1
  }
}
