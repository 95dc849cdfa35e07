import * as fs from 'node:fs';
import * as os from 'node:os';
import * as path from 'node:path';
import { repositoryRoot } from '../../src/config';
import { loadSeccompProfile } from '../../src/seccomp';

const profile = path.join(repositoryRoot(), 'images/sandbox/seccomp.json');
const schema = path.join(repositoryRoot(), 'images/sandbox/seccomp.schema.json');

describe('loadSeccompProfile', () => {
  let dir: string;
  beforeAll(() => (dir = fs.mkdtempSync(path.join(os.tmpdir(), 'seccomp-'))));
  afterAll(() => fs.rmSync(dir, { recursive: true, force: true }));

  it('accepts the repository profile and returns it as compact JSON', () => {
    const r = loadSeccompProfile(profile, schema);
    expect(r.valid).toBe(true);
    if (r.valid) expect(JSON.parse(r.profile).defaultAction).toBe('SCMP_ACT_ERRNO');
  });

  it('refuses a missing profile with one sentence', () => {
    expect(loadSeccompProfile(path.join(dir, 'nope.json'), schema)).toEqual({ valid: false, message: expect.stringMatching(/is missing or unreadable\.$/) });
  });

  it('refuses a profile that is not JSON', () => {
    const p = path.join(dir, 'broken.json');
    fs.writeFileSync(p, '{ nope');
    expect(loadSeccompProfile(p, schema)).toEqual({ valid: false, message: expect.stringContaining('is not valid JSON') });
  });

  it('refuses a profile that allows by default, naming where it breaks the schema', () => {
    const p = path.join(dir, 'allow.json');
    fs.writeFileSync(p, JSON.stringify({ defaultAction: 'SCMP_ACT_ALLOW', syscalls: [] }));
    const r = loadSeccompProfile(p, schema);
    expect(r.valid).toBe(false);
    if (!r.valid) expect(r.message).toMatch(/does not match its schema: \/defaultAction/);
  });
});
