// G04 and S1: a command in the sandbox is an unprivileged process that cannot open raw sockets,
// create interfaces, mount, enter or create namespaces, trace, load modules, poke the kernel, or
// gain privileges through setuid files. Each attempt asserts the errno the kernel (or gVisor) gives.
import { existsSync, readFileSync } from 'node:fs';
import { RUNTIMES, SANDBOX_IMAGES, execHostFor, expectRefused, repoFixture, runProbes, type ExecHostProcess, type ProbeResult, type RepoFixture } from '../support/attack-harness';

let host: ExecHostProcess;
let repo: RepoFixture;

beforeAll(() => {
  repo = repoFixture();
});

afterAll(() => {
  repo?.remove();
});

// Syscall numbers the seccomp profile must deny; called raw so that no libc wrapper stands in front.
const SYSCALLS = String.raw`
NR = {
  "x86_64": {"init_module": 175, "finit_module": 313, "delete_module": 176, "add_key": 248, "keyctl": 250, "bpf": 321,
             "userfaultfd": 323, "perf_event_open": 298, "kexec_load": 246, "pivot_root": 155, "swapon": 167},
  "aarch64": {"init_module": 105, "finit_module": 273, "delete_module": 106, "add_key": 217, "keyctl": 219, "bpf": 280,
              "userfaultfd": 282, "perf_event_open": 241, "kexec_load": 104, "pivot_root": 41, "swapon": 224},
}[MACHINE]
`;

describe.each(SANDBOX_IMAGES)('sandbox image from $route', (image) => {
  execHostFor(image, (started) => {
    host = started;
  });

  describe.each(RUNTIMES)('privileges under %s', (runtime) => {
    let sandboxId: string;
    let r: Record<string, ProbeResult>;

    beforeAll(async () => {
      sandboxId = (await host.createSandbox({ repository: { source: repo.dir }, runtime }, `priv-${runtime}`)).sandboxId;
      r = await runProbes(
        host.client,
        sandboxId,
        SYSCALLS +
          String.raw`
import fcntl, struct, shutil, stat, subprocess
probe("AF_PACKET raw socket", lambda: socket.socket(socket.AF_PACKET, socket.SOCK_RAW, 0))
probe("AF_INET SOCK_RAW icmp", lambda: socket.socket(socket.AF_INET, socket.SOCK_RAW, socket.IPPROTO_ICMP))
probe("AF_INET6 SOCK_RAW", lambda: socket.socket(socket.AF_INET6, socket.SOCK_RAW, socket.IPPROTO_RAW))
probe("netlink route socket", lambda: socket.socket(socket.AF_NETLINK, socket.SOCK_RAW, 0))
def netlink_newlink():
    # RTM_NEWLINK for a "dummy" interface, as "ip link add evil0 type dummy" would send it.
    s = socket.socket(socket.AF_NETLINK, socket.SOCK_RAW, 0)
    def rta(t, payload):
        l = 4 + len(payload)
        return struct.pack("HH", l, t) + payload + b"\0" * ((4 - l % 4) % 4)
    attrs = rta(3, b"evil0\0") + rta(18, rta(1, b"dummy\0"))  # IFLA_IFNAME, IFLA_LINKINFO/IFLA_INFO_KIND
    body = struct.pack("BxHiII", 0, 0, 0, 0, 0) + attrs
    s.send(struct.pack("IHHII", 16 + len(body), 16, 1 | 4 | 0x400 | 0x200, 1, 0) + body)  # REQUEST|ACK|CREATE|EXCL
    resp = s.recv(4096)
    if struct.unpack("IH", resp[:6])[1] == 2:  # NLMSG_ERROR
        err = struct.unpack("i", resp[16:20])[0]
        if err < 0:
            raise OSError(-err, os.strerror(-err))
        return "created"
    return "unexpected reply"
probe("netlink RTM_NEWLINK", netlink_newlink)
def tun():
    fd = os.open("/dev/net/tun", os.O_RDWR)
    ifr = struct.pack("16sH22s", b"evil0", 0x0001 | 0x1000, b"\0" * 22)  # IFF_TUN | IFF_NO_PI
    return repr(fcntl.ioctl(fd, 0x400454CA, ifr))  # TUNSETIFF creates the interface
probe("tun interface", tun)
def lo_down():
    s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    return repr(fcntl.ioctl(s, 0x8914, struct.pack("16sH22s", b"lo", 0, b"\0" * 22)))  # SIOCSIFFLAGS
probe("SIOCSIFFLAGS lo", lo_down)
probe("ip command", lambda: shutil.which("ip"))
probe("interfaces after", lambda: sorted(os.listdir("/sys/class/net")))
os.makedirs("/tmp/m", exist_ok=True)
probe("mount tmpfs", lambda: call("mount", b"none", b"/tmp/m", b"tmpfs", 0, None))
probe("mount proc", lambda: call("mount", b"proc", b"/tmp/m", b"proc", 0, None))
probe("mount bind", lambda: call("mount", b"/workspace", b"/tmp/m", None, 4096, None))  # MS_BIND
probe("unshare user", lambda: call("unshare", 0x10000000))
probe("unshare net", lambda: call("unshare", 0x40000000))
probe("unshare mount", lambda: call("unshare", 0x00020000))
probe("setns net", lambda: call("setns", os.open("/proc/self/ns/net", os.O_RDONLY), 0))
def unshare_cmd():
    p = subprocess.run(["unshare", "-U", "true"], capture_output=True, text=True)
    return {"code": p.returncode, "stderr": p.stderr.strip()}
probe("unshare -U", unshare_cmd)
probe("ptrace traceme", lambda: call("ptrace", 0, 0, None, None))
probe("ptrace attach parent", lambda: call("ptrace", 16, os.getppid(), None, None))
probe("ptrace attach pid 1", lambda: call("ptrace", 16, 1, None, None))
probe("init_module", lambda: sys_call(NR["init_module"], None, 0, b""))
probe("finit_module", lambda: sys_call(NR["finit_module"], os.open("/etc/passwd", os.O_RDONLY), b"", 0))
probe("delete_module", lambda: sys_call(NR["delete_module"], b"ext4", 0))
probe("add_key", lambda: sys_call(NR["add_key"], b"user", b"x", b"y", 1, -3))
probe("keyctl", lambda: sys_call(NR["keyctl"], 0, -3, 0))
probe("bpf", lambda: sys_call(NR["bpf"], 5, None, 0))
probe("userfaultfd", lambda: sys_call(NR["userfaultfd"], 0))
probe("perf_event_open", lambda: sys_call(NR["perf_event_open"], None, 0, -1, -1, 0))
probe("kexec_load", lambda: sys_call(NR["kexec_load"], 0, 0, None, 0))
probe("pivot_root", lambda: sys_call(NR["pivot_root"], b"/tmp", b"/tmp/m"))
probe("swapon", lambda: sys_call(NR["swapon"], b"/tmp/m", 0))
probe("write sysrq-trigger", lambda: open("/proc/sysrq-trigger", "w").write("c"))
def setuid_files():
    out = subprocess.run(["find", "/", "(", "-path", "/proc", "-o", "-path", "/sys", ")", "-prune", "-o", "-type", "f", "-perm", "/6000", "-print"], capture_output=True, text=True)
    return out.stdout.split()
probe("setuid files", setuid_files)
def chmod_suid():
    shutil.copy("/usr/bin/id", "/workspace/.suid-id")
    os.chmod("/workspace/.suid-id", 0o6755)
    bits = oct(os.stat("/workspace/.suid-id").st_mode & 0o6000)
    p = subprocess.run(["/workspace/.suid-id", "-u"], capture_output=True, text=True)
    os.unlink("/workspace/.suid-id")
    return {"bits": bits, "code": p.returncode, "stdout": p.stdout.strip(), "stderr": p.stderr.strip()}
probe("chmod u+s then run", chmod_suid)
probe("no_new_privs", lambda: call("prctl", 39, 0, 0, 0, 0))  # PR_GET_NO_NEW_PRIVS
def status():
    return {k: v.strip() for k, v in (l.split(":", 1) for l in open("/proc/self/status").read().splitlines()) if k.startswith("Cap") or k == "Seccomp"}
probe("status", status)
# The keeper (pid 1 and its sleep) runs as a user of its own: no command may write into it, read
# where it stands, or signal it — the way a command would take it over and outlive its kill.
def uid_of(pid):
    return int(next(l for l in open(f"/proc/{pid}/status").read().splitlines() if l.startswith("Uid:")).split()[1])
probe("pid 1 user", lambda: uid_of(1))
def write_mem(pid):
    with open(f"/proc/{pid}/mem", "r+b", buffering=0) as m:
        m.seek(int(open(f"/proc/{pid}/maps").read().split("-", 1)[0], 16))
        return m.write(b"\x7fELF")
probe("write pid 1 memory", lambda: write_mem(1))
probe("read pid 1 syscall", lambda: open("/proc/1/syscall").read())
probe("signal pid 1", lambda: os.kill(1, 19))  # SIGSTOP
def not_mine():
    found = {}
    for pid in sorted(int(p) for p in os.listdir("/proc") if p.isdigit()):
        try:
            uid = uid_of(pid)
        except (FileNotFoundError, ProcessLookupError):
            continue
        if uid == os.getuid():
            continue
        seen = {"uid": uid}
        for what, attempt in (("memory", lambda: write_mem(pid)), ("signal", lambda: os.kill(pid, 19))):
            try:
                attempt()
                seen[what] = "done"
            except OSError as e:
                seen[what] = errno.errorcode.get(e.errno, str(e.errno))
        found[str(pid)] = seen
    return found
probe("processes of other users", not_mine)
probe("ids", lambda: {"uid": os.getuid(), "euid": os.geteuid(), "gid": os.getgid(), "groups": os.getgroups(), "workspace owner": os.stat("/workspace").st_uid})
def apparmor():
    return open("/proc/self/attr/current").read().strip()
probe("apparmor label", apparmor)
`,
      );
    });

    it('runs the command itself under the seccomp filter', () => {
      // `docker exec` under gVisor releases before 2026-03 installs the OCI profile on pid 1 only
      // (google/gvisor#12693): commands then run without it.
      const finding = 'Seccomp mode of a command run through exec (2 = filtered)';
      expect({ [finding]: (r['status']?.value as Record<string, string> | undefined)?.Seccomp }).toEqual({ [finding]: '2' });
    });

    it('refuses raw and packet sockets', () => {
      expectRefused(r, 'AF_PACKET raw socket', 'EPERM');
      expectRefused(r, 'AF_INET SOCK_RAW icmp', 'EPERM');
      expectRefused(r, 'AF_INET6 SOCK_RAW', 'EPERM');
    });

    it('refuses creating or reconfiguring an interface', () => {
      expect(r['ip command']).toMatchObject({ ok: true, value: null });
      // The seccomp profile refuses the netlink socket itself, under runsc too (applied by the launcher).
      expectRefused(r, 'netlink RTM_NEWLINK', 'EPERM');
      // runc: the device node is absent; gVisor emulates /dev/net/tun but TUNSETIFF needs CAP_NET_ADMIN.
      expectRefused(r, 'tun interface', runtime === 'runc' ? 'ENOENT' : 'EPERM');
      // gVisor does not implement the ioctl at all; Linux refuses it without CAP_NET_ADMIN.
      expectRefused(r, 'SIOCSIFFLAGS lo', runtime === 'runc' ? 'EPERM' : 'ENOTTY');
      expect(r['interfaces after']).toMatchObject({ ok: true, value: ['lo'] });
    });

    it('refuses mount (tmpfs, proc, bind)', () => {
      expectRefused(r, 'mount tmpfs', 'EPERM');
      expectRefused(r, 'mount proc', 'EPERM');
      expectRefused(r, 'mount bind', 'EPERM');
      expectRefused(r, 'pivot_root', 'EPERM');
    });

    it('refuses unshare and setns', () => {
      expectRefused(r, 'unshare user', 'EPERM');
      expectRefused(r, 'unshare net', 'EPERM');
      expectRefused(r, 'unshare mount', 'EPERM');
      expectRefused(r, 'setns net', 'EPERM');
      expect(r['unshare -U']).toMatchObject({ ok: true, value: { code: 1, stderr: 'unshare: unshare failed: Operation not permitted' } });
    });

    it('refuses ptrace', () => {
      expectRefused(r, 'ptrace traceme', 'EPERM');
      expectRefused(r, 'ptrace attach parent', 'EPERM');
      expectRefused(r, 'ptrace attach pid 1', 'EPERM');
    });

    it('refuses loading and unloading kernel modules', () => {
      expectRefused(r, 'init_module', 'EPERM');
      expectRefused(r, 'finit_module', 'EPERM');
      expectRefused(r, 'delete_module', 'EPERM');
    });

    it('denies the system calls a coding sandbox never needs (seccomp profile, not only missing capabilities)', () => {
      // Allowed, these would fail with EFAULT/EINVAL on the null arguments; EPERM is the filter's answer.
      for (const name of ['add_key', 'keyctl', 'bpf', 'userfaultfd', 'perf_event_open', 'kexec_load', 'swapon', 'netlink route socket']) expectRefused(r, name, 'EPERM');
      expect(r['status']?.value).toMatchObject({ Seccomp: '2' });
    });

    it('refuses writing /proc/sysrq-trigger', () => {
      // gVisor serves its own /proc and refuses the write to uid 10001. Under runc, Docker mounts the
      // file read-only, and a kernel built without magic SysRq (like this host's) has no such file.
      const expected = runtime === 'runsc' ? 'EACCES' : existsSync('/proc/sysrq-trigger') ? 'EROFS' : 'ENOENT';
      expectRefused(r, 'write sysrq-trigger', expected);
    });

    it("cannot write into, read the place of, or signal the sandbox's pid 1 or any process not its own", () => {
      // Were pid 1 the command's own user, /proc/1/mem would take a write without ptrace (the seccomp
      // profile refuses ptrace, not the file), and a process written into pid 1 is never killed.
      expect(r['pid 1 user']).toMatchObject({ ok: true, value: 10000 });
      expectRefused(r, 'write pid 1 memory', 'EACCES');
      // gVisor has no /proc/PID/syscall at all.
      expectRefused(r, 'read pid 1 syscall', runtime === 'runsc' ? 'ENOENT' : 'EACCES');
      expectRefused(r, 'signal pid 1', 'EPERM');
      const others = r['processes of other users']?.value as Record<string, { uid: number; memory: string; signal: string }>;
      expect(Object.keys(others ?? {})).toContain('1');
      for (const [pid, seen] of Object.entries(others)) expect({ pid, ...seen }).toEqual({ pid, uid: 10000, memory: 'EACCES', signal: 'EPERM' });
    });

    it('runs as a non-root user with no capability, owning the working copy', () => {
      expect(r['ids']).toMatchObject({ ok: true, value: { uid: 10001, euid: 10001, gid: 10001, 'workspace owner': 10001 } });
      expect((r['ids']?.value as { groups: number[] }).groups).not.toContain(0);
      const caps = r['status']?.value as Record<string, string>;
      for (const set of ['CapInh', 'CapPrm', 'CapEff', 'CapBnd']) expect({ set, value: caps[set] }).toEqual({ set, value: '0000000000000000' });
    });

    it('has no setuid or setgid file, and a setuid bit set by the user grants nothing (no-new-privileges)', () => {
      expect(r['setuid files']).toMatchObject({ ok: true, value: [] });
      expect(r['no_new_privs']).toMatchObject({ ok: true, value: 1 });
      // The bits are really set on the file; running it still gives uid 10001 and nothing more.
      expect(r['chmod u+s then run']).toMatchObject({ ok: true, value: { bits: '0o6000', code: 0, stdout: '10001' } });
    });

    it('reports the seccomp profile valid and the AppArmor state it really has', async () => {
      const health = await host.client.healthReport();
      expect(health.seccomp).toMatchObject({ valid: true });
      expect(health.runtimes[runtime]).toBe(true);
      // A kernel with AppArmor must get the profile; one without gets a warning, never a silent pass.
      expect(health.apparmor.state).not.toBe('failed');
      if (health.apparmor.state === 'enforced') {
        if (runtime === 'runc') expect(r['apparmor label']).toMatchObject({ ok: true, value: `${health.apparmor.profile} (enforce)` });
      } else {
        const enabled = '/sys/module/apparmor/parameters/enabled';
        expect({ hostHasAppArmor: existsSync(enabled) && readFileSync(enabled, 'utf8').trim() === 'Y' }).toEqual({ hostHasAppArmor: false });
        expect(health.apparmor.message ?? '').toMatch(/\S+\s+\S+\s+\S+/);
      }
    });
  });
});
