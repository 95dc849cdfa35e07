// S7: the two build routes of the sandbox image (build-offline.sh, and the Dockerfile built from a
// base imported offline) make the same image: the same configuration and the same Debian packages,
// so the battery's verdict on one holds for the other and the routes cannot drift apart unnoticed.
import { execFileSync } from 'node:child_process';
import { SANDBOX_IMAGES, type SandboxImage } from '../support/attack-harness';

interface ImageConfig {
  User?: string;
  WorkingDir?: string;
  Env?: string[] | null;
  Cmd?: string[] | null;
  Entrypoint?: string[] | null;
  Labels?: Record<string, string> | null;
}

function config(image: SandboxImage) {
  const c = JSON.parse(execFileSync('docker', ['image', 'inspect', '--format', '{{json .Config}}', image.tag], { encoding: 'utf8' })) as ImageConfig;
  // The Dockerfile's ENV replaces its base's PATH in place and appends the rest: the order differs, the variables may not.
  return { User: c.User, WorkingDir: c.WorkingDir, Env: [...(c.Env ?? [])].sort(), Cmd: c.Cmd, Entrypoint: c.Entrypoint ?? null, title: c.Labels?.['org.opencontainers.image.title'] };
}

/** Installed packages by name: version and architecture, as dpkg inside the image reports them. */
function packages(image: SandboxImage): Map<string, string> {
  const out = execFileSync('docker', ['run', '--rm', '--network', 'none', '--entrypoint', 'dpkg-query', image.tag, '-W', '-f', '${Package}\t${Version} ${Architecture}\n'], { encoding: 'utf8' });
  return new Map(
    out
      .split('\n')
      .filter(Boolean)
      .map((line) => line.split('\t') as [string, string]),
  );
}

const [offline, dockerfile] = SANDBOX_IMAGES;
// Outside CI the battery may run on the offline image alone (sandboxImages); there is nothing to compare then.
const compare = offline && dockerfile ? describe : describe.skip;

compare('the sandbox images of both build routes', () => {
  it('have the same configuration: user, working directory, environment, command and title', () => {
    const a = config(offline!);
    expect(a).toEqual({
      User: '10001:10001',
      WorkingDir: '/workspace',
      Env: ['HOME=/home/sandbox', 'LANG=C.UTF-8', 'PATH=/usr/local/bin:/usr/bin:/bin'],
      Cmd: ['sleep', 'infinity'],
      Entrypoint: null,
      title: 'lemniscate-sandbox',
    });
    expect(config(dockerfile!)).toEqual(a);
  });

  it('have the same Debian packages, at the same versions when built from the same point release', () => {
    const a = packages(offline!);
    const b = packages(dockerfile!);
    expect(a.size).toBeGreaterThan(100);
    expect([...b.keys()].sort()).toEqual([...a.keys()].sort());
    // base-files carries the point release. Debian's main suite changes only at point releases, so two
    // builds from the same one installed the very same versions; across one, only versions may differ.
    if (a.get('base-files') === b.get('base-files')) expect(Object.fromEntries(b)).toEqual(Object.fromEntries(a));
  });
});
