#!/bin/sh
# Shared finishing step of both image builds, run against a root filesystem ($1):
# the unprivileged sandbox user that owns the working copy, no setuid/setgid bits, no package caches.
# $2: the static seccomp loader built from seccomp-load.c, installed beside the launcher.
# $3: the static command runner built from sandbox-runner.c (docs/decisions/0016), beside it.
set -eu
root=${1:?usage: rootfs-setup.sh ROOTFS LOADER RUNNER}
loader=${2:?usage: rootfs-setup.sh ROOTFS LOADER RUNNER}
runner=${3:?usage: rootfs-setup.sh ROOTFS LOADER RUNNER}
grep -q '^sandbox:' "$root/etc/passwd" || echo 'sandbox:x:10001:10001:Lemniscate sandbox:/home/sandbox:/bin/bash' >> "$root/etc/passwd"
grep -q '^sandbox:' "$root/etc/group" || echo 'sandbox:x:10001:' >> "$root/etc/group"
grep -q '^sandbox:' "$root/etc/shadow" 2>/dev/null || echo 'sandbox:!:19000::::::' >> "$root/etc/shadow"
mkdir -p "$root/home/sandbox" "$root/workspace"
chown 10001:10001 "$root/home/sandbox" "$root/workspace"
# Every command starts through this launcher, which applies the sandbox's seccomp profile itself: under
# gVisor the container's profile reaches pid 1 only (docs/decisions/0008-seccomp-under-gvisor-exec.md).
# Kept here so that changing it changes the image tag. Root-owned, and read-only like the whole root filesystem.
mkdir -p "$root/usr/local/lib/lemniscate"
cat > "$root/usr/local/lib/lemniscate/seccomp-exec" <<'LAUNCHER'
#!/usr/bin/python3 -I
# Installs the sandbox's seccomp profile on this process, then runs `bash -c COMMAND` under it.
# gVisor releases before 2026 apply the container's profile to its pid 1 only (google/gvisor#12693),
# so every command is started through this launcher; under runc the identical second filter is a no-op.
# The profile comes from the exec-host in LEMNISCATE_SANDBOX_SECCOMP: the exact validated profile the
# container was created with. Anything that goes wrong refuses the command (exit 126): never unfiltered.
import json
import os
import sys

ENV = "LEMNISCATE_SANDBOX_SECCOMP"
LOADER = "/usr/local/lib/lemniscate/seccomp-load"


def refuse(reason):
    sys.stderr.write("The command was not run: " + reason + "\n")
    sys.stderr.flush()
    os._exit(126)


try:
    import seccomp
except Exception as e:  # noqa: BLE001 - any import failure means no filter
    refuse("the sandbox image lacks libseccomp's Python bindings (" + str(e) + "), so the seccomp profile cannot be applied.")

ARCHES = {
    "SCMP_ARCH_X86_64": "X86_64", "SCMP_ARCH_X86": "X86", "SCMP_ARCH_X32": "X32",
    "SCMP_ARCH_AARCH64": "AARCH64", "SCMP_ARCH_ARM": "ARM",
}
OPS = {
    "SCMP_CMP_NE": seccomp.NE, "SCMP_CMP_LT": seccomp.LT, "SCMP_CMP_LE": seccomp.LE, "SCMP_CMP_EQ": seccomp.EQ,
    "SCMP_CMP_GE": seccomp.GE, "SCMP_CMP_GT": seccomp.GT, "SCMP_CMP_MASKED_EQ": seccomp.MASKED_EQ,
}
EPERM = 1


def action(name, errno_ret, default_errno):
    # Same meaning as runc gives the OCI names; an ERRNO without a number is EPERM, as in runc.
    if name == "SCMP_ACT_ALLOW":
        return ("allow", seccomp.ALLOW)
    if name == "SCMP_ACT_ERRNO":
        n = errno_ret if errno_ret is not None else default_errno
        return (("errno", n), seccomp.ERRNO(n))
    if name in ("SCMP_ACT_KILL", "SCMP_ACT_KILL_THREAD"):
        return ("kill", seccomp.KILL)
    if name == "SCMP_ACT_KILL_PROCESS":
        return ("kill_process", seccomp.KILL_PROCESS)
    if name == "SCMP_ACT_LOG":
        return ("log", seccomp.LOG)
    raise ValueError("the action " + repr(name) + " is not one the launcher knows")


def arch_of(name):
    key = ARCHES.get(name)
    if key is None or not hasattr(seccomp.Arch, key):
        return None
    return getattr(seccomp.Arch, key)


def build(profile):
    default_errno = profile.get("defaultErrnoRet", EPERM)
    default_key, default_action = action(profile["defaultAction"], profile.get("defaultErrnoRet"), EPERM)
    f = seccomp.SyscallFilter(default_action)
    native = seccomp.system_arch()
    # As runc does: the sub-architectures listed for the native one are filtered by the same rules,
    # so a 32-bit entry point cannot bypass them.
    for entry in profile.get("archMap", []):
        if arch_of(entry["architecture"]) != native:
            continue
        for sub in entry.get("subArchitectures", []):
            a = arch_of(sub)
            if a is None:
                raise ValueError("the sub-architecture " + sub + " is unknown to libseccomp")
            if not f.exist_arch(a):
                f.add_arch(a)
    rules = 0
    for entry in profile["syscalls"]:
        key, act = action(entry["action"], entry.get("errnoRet"), default_errno)
        # runc skips rules that repeat the default action (libseccomp refuses them); the outcome is identical.
        if key == default_key:
            continue
        args = entry.get("args") or []
        for a in args:
            if a["op"] not in OPS:
                raise ValueError("the comparison " + repr(a["op"]) + " is not one the launcher knows")
        conds = [seccomp.Arg(a["index"], OPS[a["op"]], a["value"], a.get("valueTwo", 0)) for a in args]
        indexes = [a["index"] for a in args]
        # As runc: several conditions on one argument are alternatives (one rule each), otherwise all must hold.
        groups = [[c] for c in conds] if len(set(indexes)) < len(indexes) else [conds]
        for name in entry["names"]:
            # A name this architecture does not have is skipped, as runc does. Safe because the schema
            # only admits a denying default: a skipped rule can only leave that system call denied.
            if seccomp.resolve_syscall(seccomp.Arch.NATIVE, name) < 0:
                continue
            for g in groups:
                f.add_rule(act, name, *g)
                rules += 1
    if rules == 0:
        raise ValueError("the profile yields no rule for this architecture")
    # Docker already sets no_new_privs; the kernel requires it for an unprivileged filter, so ask again.
    f.set_attr(seccomp.Attr.CTL_NNP, 1)
    return f


def export(f):
    # The exec-host compiles the profile once, in a throwaway container, for the static loader beside
    # this launcher; the BPF program goes to stdout in base64 (one line) and nothing runs.
    if not os.access(LOADER, os.X_OK):
        refuse("this image has no seccomp loader (" + LOADER + ").")
    import base64
    r, w = os.pipe()
    with os.fdopen(w, "wb") as out:
        f.export_bpf(out)
    with os.fdopen(r, "rb") as inp:
        program = inp.read()
    if not program or len(program) % 8 != 0:
        refuse("libseccomp exported no whole BPF program.")
    sys.stdout.write(base64.b64encode(program).decode("ascii") + "\n")
    sys.stdout.flush()
    os._exit(0)


def main():
    if len(sys.argv) != 2:
        refuse("the launcher takes exactly one argument, the command.")
    command = sys.argv[1]
    raw = os.environ.pop(ENV, None)
    if not raw:
        refuse("no seccomp profile was passed to the launcher.")
    try:
        profile = json.loads(raw)
        if profile.get("defaultAction") not in ("SCMP_ACT_ERRNO", "SCMP_ACT_KILL", "SCMP_ACT_KILL_PROCESS", "SCMP_ACT_KILL_THREAD"):
            raise ValueError("its default action does not deny")
        f = build(profile)
        if command == "--export-bpf":
            export(f)
        f.load()
    except Exception as e:  # noqa: BLE001 - any failure means the command would run unfiltered
        refuse("the seccomp profile could not be applied (" + str(e) + ").")
    try:
        os.execve("/bin/bash", ["/bin/bash", "-c", command], os.environ)
    except OSError as e:
        sys.stderr.write("bash could not be started: " + e.strerror + "\n")
        os._exit(126)


main()
LAUNCHER
cp "$loader" "$root/usr/local/lib/lemniscate/seccomp-load"
cp "$runner" "$root/usr/local/lib/lemniscate/sandbox-runner"
chown 0:0 "$root/usr/local/lib/lemniscate" "$root/usr/local/lib/lemniscate/seccomp-exec" "$root/usr/local/lib/lemniscate/seccomp-load" "$root/usr/local/lib/lemniscate/sandbox-runner"
chmod 0755 "$root/usr/local/lib/lemniscate" "$root/usr/local/lib/lemniscate/seccomp-exec" "$root/usr/local/lib/lemniscate/seccomp-load" "$root/usr/local/lib/lemniscate/sandbox-runner"
# Nothing in the sandbox may raise privileges: strip every setuid and setgid bit.
find "$root" -xdev -type f \( -perm -4000 -o -perm -2000 \) -exec chmod ug-s {} +
rm -rf "$root/var/lib/apt/lists/"* "$root/var/cache/apt/"* "$root/usr/share/doc/"* "$root/usr/share/man/"* "$root/usr/share/info/"*
# Git refuses a repository owned by someone else; the working copy is owned by the sandbox user, so trust it.
printf '[safe]\n\tdirectory = /workspace\n[user]\n\tname = Lemniscate sandbox\n\temail = sandbox@lemniscate.invalid\n' > "$root/etc/gitconfig"
