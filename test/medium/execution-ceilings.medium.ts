import type { ChildProcess } from 'node:child_process';
import { mkdirSync, mkdtempSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { stringify } from 'yaml';
import { buildCli, lemni } from '../../apps/cli/test/support/run-bin';
import { EXECUTION_ENV, type ExecutionKey } from '@lemniscate/session';
import { withTestDatabases } from '../../apps/gateway/test/support/db';
import { ADMIN_EMAIL, ADMIN_PASSWORD, bearer, createProject, createUser, startGateway, tokenFor, type Gateway } from '../../apps/gateway/test/support/harness';

/**
 * P1, L5: the project policy's `execution:` values are ceilings that nothing on a workstation can
 * lift. Generated: every limit × every place a value can come from (an uploaded agent's frontmatter,
 * a LEMNISCATE_SESSION_* variable, the CLI configuration file) × below / equal / above the ceiling,
 * once as a request sent straight to the gateway API and once through the real `lemni` upload path.
 */
jest.setTimeout(240_000);

const CEILINGS = {
  sessionMaxActions: 40,
  sessionMaxMinutes: 30,
  sessionMaxExtensions: 3,
  toolLoopThreshold: 4,
  subagentMaxDepth: 2,
  subagentMaxPerSession: 20,
  subagentMaxConcurrent: 4,
} satisfies Partial<Record<ExecutionKey, number>>;
type LimitKey = keyof typeof CEILINGS;
const KEYS = Object.keys(CEILINGS) as LimitKey[];
const UNITS: Record<LimitKey, string> = {
  sessionMaxActions: 'actions',
  sessionMaxMinutes: 'minutes',
  sessionMaxExtensions: 'extensions',
  toolLoopThreshold: 'repetitions',
  subagentMaxDepth: 'levels',
  subagentMaxPerSession: 'subagents',
  subagentMaxConcurrent: 'subagents',
};

type Place = 'frontmatter' | 'environment' | 'configuration';
const PLACES: Place[] = ['frontmatter', 'environment', 'configuration'];
type Where = 'below' | 'equal' | 'above';
const WHERES: Where[] = ['below', 'equal', 'above'];
const valueFor = (key: LimitKey, where: Where) => CEILINGS[key] + (where === 'below' ? -1 : where === 'equal' ? 0 : 1);

/** Where the sentence says the value came from. */
const origin = (place: Place, key: ExecutionKey) =>
  place === 'environment' ? `${EXECUTION_ENV[key]}=` : place === 'configuration' ? 'in ~/.lemniscate/config.yaml' : 'in ~/.lemniscate/agents/fast.md';

const agentFile = (values: Record<string, unknown>) => `---\ndescription: fast\n${stringify(values)}---\nGo fast.\n`;

/** The request fields that carry `values` from `place`, as the CLI builds them. */
function requestFields(place: Place, values: Partial<Record<ExecutionKey, number | boolean>>): Record<string, unknown> {
  switch (place) {
    case 'environment':
      return { environment: Object.fromEntries(Object.entries(values).map(([k, v]) => [EXECUTION_ENV[k as ExecutionKey], String(v)])) };
    case 'configuration':
      return { userConfig: { execution: values } };
    case 'frontmatter':
      return { agent: 'fast', userAgents: [{ fileName: 'fast.md', text: agentFile(values) }] };
  }
}

function expectRefusal(message: string, key: ExecutionKey, value: number | boolean, place: Place, project: string): void {
  expect(message).toContain(place === 'environment' ? `${EXECUTION_ENV[key]}=${String(value)} is refused` : `${key}: ${String(value)} ${origin(place, key)} is refused`);
  expect(message).toContain(`is refused: the policy of project "${project}" (version 1)`);
  if (key === 'toolLoopDetection') expect(message).toContain('does not allow a workstation to switch it off (execution.allowToolLoopDetectionOff)');
  else expect(message).toContain(`sets the ceiling execution.${key} at ${CEILINGS[key as LimitKey]} ${UNITS[key as LimitKey]}`);
}

withTestDatabases((db) => {
  let gw: Gateway;
  let dev: string;
  const projects = { strict: 'ceilings', loopOff: 'ceilings-loop-off' };
  const ids: Record<string, string> = {};

  beforeAll(async () => {
    buildCli();
    gw = await startGateway(db());
    const admin = (await tokenFor(gw, ADMIN_EMAIL, ADMIN_PASSWORD)).token;
    ids.strict = await createProject(gw, admin, projects.strict);
    ids.loopOff = await createProject(gw, admin, projects.loopOff);
    for (const [id, execution] of [
      [ids.strict, CEILINGS],
      [ids.loopOff, { ...CEILINGS, allowToolLoopDetectionOff: true }],
    ] as const) {
      const res = await gw
        .http()
        .post(`/api/v1/projects/${id}/policy`)
        .set(bearer(admin))
        .send({ document: { version: 1, execution } });
      expect(res.status).toBe(201);
    }
    dev = (await createUser(gw, admin, 'dev@example.test', 'developer', [ids.strict as string, ids.loopOff as string])).token;
  });
  afterAll(async () => {
    await gw?.close();
  });

  const start = (projectId: string, fields: Record<string, unknown>) =>
    gw
      .http()
      .post('/api/v1/sessions')
      .set(bearer(dev))
      .send({ projectId, instruction: 'go', ...fields });

  describe('a request sent straight to the gateway API', () => {
    const cases = KEYS.flatMap((key) => PLACES.flatMap((place) => WHERES.map((where) => ({ key, place, where }))));

    it.each(cases)('$key from the $place, $where the ceiling', async ({ key, place, where }) => {
      const value = valueFor(key, where);
      const res = await start(ids.strict as string, requestFields(place, { [key]: value }));
      if (where === 'above') {
        expect(res.status).toBe(400);
        expect(res.body.code).toBe('validation_failed');
        expectRefusal(res.body.message as string, key, value, place, projects.strict);
      } else {
        expect({ status: res.status, body: res.status === 201 ? 'created' : res.body }).toEqual({ status: 201, body: 'created' });
      }
    });

    const loopCases = PLACES.flatMap((place) => [
      { place, value: false, project: 'strict' as const, accepted: false },
      { place, value: false, project: 'loopOff' as const, accepted: true },
      { place, value: true, project: 'strict' as const, accepted: true },
    ]);
    it.each(loopCases)('toolLoopDetection: $value from the $place under the $project policy', async ({ place, value, project, accepted }) => {
      const res = await start(ids[project] as string, requestFields(place, { toolLoopDetection: value }));
      if (accepted) expect(res.status).toBe(201);
      else {
        expect(res.status).toBe(400);
        expectRefusal(res.body.message as string, 'toolLoopDetection', value, place, projects[project]);
      }
    });
  });

  describe('the real CLI upload path (lemni -p)', () => {
    /** A workstation whose agent file, configuration or environment carries `values`. */
    function workstation(place: Place, values: Partial<Record<ExecutionKey, number | boolean>>): { env: Record<string, string>; args: string[] } {
      const home = mkdtempSync(path.join(os.tmpdir(), 'lemni-ceilings-'));
      mkdirSync(path.join(home, '.lemniscate', 'agents'), { recursive: true });
      const env: Record<string, string> = { HOME: home, LEMNISCATE_GATEWAY: gw.baseUrl, LEMNISCATE_TOKEN: dev };
      const args: string[] = [];
      if (place === 'configuration') writeFileSync(path.join(home, '.lemniscate', 'config.yaml'), stringify({ execution: values }), { mode: 0o600 });
      if (place === 'environment') for (const [k, v] of Object.entries(values)) env[EXECUTION_ENV[k as ExecutionKey]] = String(v);
      if (place === 'frontmatter') {
        writeFileSync(path.join(home, '.lemniscate', 'agents', 'fast.md'), agentFile(values));
        args.push('--agent', 'fast');
      }
      return { env, args };
    }

    const sessionCount = async (projectId: string) => ((await gw.http().get(`/api/v1/sessions?projectId=${projectId}&limit=500`).set(bearer(dev))).body as unknown[]).length;

    /** Runs lemni until it exits, or until the gateway has recorded its session (the loop never runs here). */
    async function run(project: 'strict' | 'loopOff', place: Place, values: Partial<Record<ExecutionKey, number | boolean>>) {
      const { env, args } = workstation(place, values);
      const before = await sessionCount(ids[project] as string);
      let child: ChildProcess | undefined;
      let created = false;
      const watch = setInterval(() => {
        void sessionCount(ids[project] as string).then((n) => {
          if (n > before && child) {
            created = true;
            child.kill('SIGTERM');
          }
        });
      }, 150);
      try {
        const result = await lemni(['-p', 'go', '--project', projects[project], ...args], {
          env,
          cwd: env.HOME,
          // Known from the start: a run whose session waits for its sandbox prints nothing for a while.
          onSpawn: (c) => (child = c),
        });
        return { ...result, created };
      } finally {
        clearInterval(watch);
      }
    }

    const above = [
      ...KEYS.flatMap((key) => PLACES.map((place) => ({ key: key as ExecutionKey, place, value: valueFor(key, 'above') as number | boolean }))),
      ...PLACES.map((place) => ({ key: 'toolLoopDetection' as ExecutionKey, place, value: false as number | boolean })),
    ];
    it.each(above)('refuses $key: $value from the $place and shows the gateway sentence', async ({ key, place, value }) => {
      const res = await run('strict', place, { [key]: value });
      expect(res.created).toBe(false);
      expect(res.code).not.toBe(0);
      expectRefusal(res.stderr, key, value, place, projects.strict);
    });

    const accepted = PLACES.flatMap((place) => (['below', 'equal'] as const).map((where) => ({ place, where })));
    it.each(accepted)('starts the session with every limit $where the ceiling from the $place', async ({ place, where }) => {
      const values = Object.fromEntries(KEYS.map((key) => [key, valueFor(key, where)]));
      const res = await run('strict', place, values);
      expect({ created: res.created, stderr: res.created ? '' : res.stderr }).toEqual({ created: true, stderr: '' });
    });

    it.each(PLACES)('lets the %s switch loop detection off when the policy allows it', async (place) => {
      const res = await run('loopOff', place, { toolLoopDetection: false });
      expect({ created: res.created, stderr: res.created ? '' : res.stderr }).toEqual({ created: true, stderr: '' });
    });
  });
});
