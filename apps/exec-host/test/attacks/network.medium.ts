// G05 and S3: no destination is reachable from a sandbox, outside or inside the host, and no name
// resolves. Every attempt must fail for the reason "there is no network", not a refusal by the peer.
import { networkInterfaces } from 'node:os';
import { RUNTIMES, SANDBOX_IMAGES, execHostFor, expectRefused, repoFixture, runProbes, type ExecHostProcess, type ProbeResult, type RepoFixture } from '../support/attack-harness';

/**
 * What a connection to a routed address fails with when the only interface is loopback: Linux
 * finds no route for the network, gVisor's netstack finds none for the host.
 */
const NO_ROUTE = { runc: 'ENETUNREACH', runsc: 'EHOSTUNREACH' } as const;
const GATEWAY_PORT = 7070;

function hostAddresses(): { v4: string[]; v6: string[] } {
  const v4 = new Set<string>(['172.17.0.1']);
  const v6 = new Set<string>();
  for (const list of Object.values(networkInterfaces())) {
    for (const a of list ?? []) {
      if (a.internal) continue;
      if (a.family === 'IPv4') v4.add(a.address);
      // Link-local addresses need an interface scope, which a sandbox with only lo cannot name.
      else if (!a.address.toLowerCase().startsWith('fe80')) v6.add(a.address);
    }
  }
  return { v4: [...v4], v6: [...v6] };
}

let host: ExecHostProcess;
let repo: RepoFixture;

beforeAll(() => {
  repo = repoFixture();
});

afterAll(() => {
  repo?.remove();
});

describe.each(SANDBOX_IMAGES)('sandbox image from $route', (image) => {
  execHostFor(image, (started) => {
    host = started;
  });

  describe.each(RUNTIMES)('network under %s', (runtime) => {
    let sandboxId: string;
    let results: Record<string, ProbeResult>;
    const addrs = hostAddresses();

    beforeAll(async () => {
      sandboxId = (await host.createSandbox({ repository: { source: repo.dir }, runtime }, `net-${runtime}`)).sandboxId;
      const targets: [string, string, number, number][] = [
        ['tcp 1.1.1.1:443', '1.1.1.1', 443, 4],
        ['tcp 169.254.169.254:80', '169.254.169.254', 80, 4],
        ['tcp 8.8.8.8:53', '8.8.8.8', 53, 4],
        ...addrs.v4.flatMap((a): [string, string, number, number][] => [
          [`tcp ${a}:${host.port}`, a, host.port, 4],
          [`tcp ${a}:${GATEWAY_PORT}`, a, GATEWAY_PORT, 4],
        ]),
        ...addrs.v6.map((a): [string, string, number, number] => [`tcp [${a}]:${host.port}`, a, host.port, 6]),
        ['tcp 127.0.0.1:exec-host', '127.0.0.1', host.port, 4],
        ['tcp 127.0.0.1:gateway', '127.0.0.1', GATEWAY_PORT, 4],
      ];
      results = await runProbes(
        host.client,
        sandboxId,
        String.raw`
TARGETS = ${JSON.stringify(targets)}
def connect(addr, port, fam):
    s = socket.socket(socket.AF_INET if fam == 4 else socket.AF_INET6, socket.SOCK_STREAM)
    s.settimeout(5)
    s.connect((addr, port))
    return "connected"
for name, addr, port, fam in TARGETS:
    probe(name, lambda: connect(addr, port, fam))
def udp():
    s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    s.sendto(b"\0", ("8.8.8.8", 53))
    return "sent"
probe("udp 8.8.8.8:53", udp)
for name in ["example.com", "registry.npmjs.org", "host.docker.internal", "metadata.google.internal", socket.gethostname() + ".lemniscate.invalid"]:
    probe("dns " + name, lambda: socket.getaddrinfo(name, 443))
probe("interfaces", lambda: sorted(os.listdir("/sys/class/net")))
probe("proc net dev", lambda: sorted(l.split(":")[0].strip() for l in open("/proc/net/dev").read().splitlines()[2:] if ":" in l))
probe("lo has ipv6", lambda: any(l.split()[-1] == "lo" for l in open("/proc/net/if_inet6").read().splitlines()) if os.path.exists("/proc/net/if_inet6") else False)
def listening():
    found = []
    for f in ["/proc/net/tcp", "/proc/net/tcp6"]:
        if os.path.exists(f):
            found += [l.split()[1] for l in open(f).read().splitlines()[1:] if l.split()[3] == "0A"]
    return found
probe("listening sockets", listening)
`,
      );
    });

    it('has no interface but loopback', () => {
      expect(results['interfaces']).toMatchObject({ ok: true, value: ['lo'] });
      expect(results['proc net dev']).toMatchObject({ ok: true, value: ['lo'] });
    });

    it('reaches no address on the internet or the cloud metadata service: there is no route', () => {
      expectRefused(results, 'tcp 1.1.1.1:443', NO_ROUTE[runtime]);
      expectRefused(results, 'tcp 169.254.169.254:80', NO_ROUTE[runtime]);
      expectRefused(results, 'tcp 8.8.8.8:53', NO_ROUTE[runtime]);
      expectRefused(results, 'udp 8.8.8.8:53', NO_ROUTE[runtime]);
    });

    it("reaches none of the host's own addresses (docker bridge, non-loopback interfaces) on the exec-host or gateway port", () => {
      for (const a of addrs.v4) {
        expectRefused(results, `tcp ${a}:${host.port}`, NO_ROUTE[runtime]);
        expectRefused(results, `tcp ${a}:${GATEWAY_PORT}`, NO_ROUTE[runtime]);
      }
      // Without an IPv6 address on lo the kernel has no source address to offer before any routing.
      const v6 = runtime === 'runc' && results['lo has ipv6']?.value === false ? 'EADDRNOTAVAIL' : NO_ROUTE[runtime];
      for (const a of addrs.v6) expectRefused(results, `tcp [${a}]:${host.port}`, v6);
    });

    it("has a loopback of its own: the exec-host listening on the host's 127.0.0.1 is not there", () => {
      // The exec-host answers on the host's 127.0.0.1 at this very port; "refused" proves a separate stack.
      expectRefused(results, 'tcp 127.0.0.1:exec-host', 'ECONNREFUSED');
      expectRefused(results, 'tcp 127.0.0.1:gateway', 'ECONNREFUSED');
    });

    it('resolves no name', () => {
      const names = Object.keys(results).filter((n) => n.startsWith('dns '));
      expect(names).toHaveLength(5);
      for (const name of names) expectRefused(results, name, 'EAI_AGAIN');
    });

    it('has nothing listening inside', () => {
      expect(results['listening sockets']).toMatchObject({ ok: true, value: [] });
    });
  });
});
