#!/bin/sh
# Shared finishing step of both image builds, run against a root filesystem ($1):
# the unprivileged sandbox user that owns the working copy, no setuid/setgid bits, no package caches.
set -eu
root=${1:?usage: rootfs-setup.sh ROOTFS}
grep -q '^sandbox:' "$root/etc/passwd" || echo 'sandbox:x:10001:10001:Lemniscate sandbox:/home/sandbox:/bin/bash' >> "$root/etc/passwd"
grep -q '^sandbox:' "$root/etc/group" || echo 'sandbox:x:10001:' >> "$root/etc/group"
grep -q '^sandbox:' "$root/etc/shadow" 2>/dev/null || echo 'sandbox:!:19000::::::' >> "$root/etc/shadow"
mkdir -p "$root/home/sandbox" "$root/workspace"
chown 10001:10001 "$root/home/sandbox" "$root/workspace"
# Nothing in the sandbox may raise privileges: strip every setuid and setgid bit.
find "$root" -xdev -type f \( -perm -4000 -o -perm -2000 \) -exec chmod ug-s {} +
rm -rf "$root/var/lib/apt/lists/"* "$root/var/cache/apt/"* "$root/usr/share/doc/"* "$root/usr/share/man/"* "$root/usr/share/info/"*
# Git refuses a repository owned by someone else; the working copy is owned by the sandbox user, so trust it.
printf '[safe]\n\tdirectory = /workspace\n[user]\n\tname = Lemniscate sandbox\n\temail = sandbox@lemniscate.invalid\n' > "$root/etc/gitconfig"
