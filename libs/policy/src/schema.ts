import { z } from 'zod';
import { parseDocument } from 'yaml';
import { mcpSchema } from './mcp';
import { READ_ONLY_PROGRAMS } from './read-only-programs';

/** The tool catalogue the gateway offers a model (DESIGN.md, the scripted model's tool names). */
export const TOOL_NAMES = ['Read', 'List', 'Search', 'Write', 'Edit', 'Bash', 'Task', 'TaskResult', 'Question'] as const;
export type ToolName = (typeof TOOL_NAMES)[number];

export const EFFECTS = ['allow', 'ask', 'deny'] as const;
export type Effect = (typeof EFFECTS)[number];

// Characters that would make a rule a shell program rather than a program name and its leading
// arguments. Rules are matched against parsed argv, so these could never match anything anyway.
const SHELL_SYNTAX = new Set([...';&|<>()`$"\'\\*?[]{}#!~\n\r\t']);

/** Splits a rule like `npm run lint` into the argv prefix it stands for. */
export function ruleWords(rule: string): string[] {
  return rule.split(' ').filter((w) => w.length > 0);
}

function commandRule(list: 'free' | 'forbidden' | 'askEveryTime') {
  return z.string().superRefine((rule, ctx) => {
    if (rule.trim().length === 0) {
      ctx.addIssue({ code: 'custom', message: 'empty command' });
      return;
    }
    const bad = [...rule].find((c) => SHELL_SYNTAX.has(c));
    if (bad !== undefined) {
      ctx.addIssue({
        code: 'custom',
        message: `\`${rule}\` is not a plain command: a ${list} rule is a program name followed by its leading arguments, separated by spaces, without quotes, globs or shell operators (found \`${JSON.stringify(bad).slice(1, -1)}\`)`,
      });
    }
  });
}

/** An option as a rule names it: `-x`, `--long` or a single-dash long option such as `-exec`. */
const optionName = z.string().regex(/^--?[A-Za-z0-9][A-Za-z0-9_.:+-]*$/, 'an option is written with its dashes and no value, like `-o`, `--config` or `-exec`');

const freeRuleObject = z
  .strictObject({
    command: commandRule('free').describe('The program and its leading arguments, as in a plain rule.'),
    options: z
      .strictObject({
        allow: z.array(optionName).optional().describe('When given, the only options that keep the command free; any other option makes it ask.'),
        ask: z.array(optionName).default([]).describe('Options that make the command ask (a long option also when abbreviated or written --name=value).'),
      })
      .prefault({})
      .describe('Which options keep the command free.'),
    assignments: z.enum(['allow', 'ask']).default('allow').describe('`ask`: a NAME=value argument (make SHELL=…) makes the command ask.'),
    paths: z
      .enum(['inside', 'any'])
      .default('inside')
      .describe('`inside`: an argument or option value naming a path outside the working copy (absolute, ~ or escaping with ..) makes the command ask.'),
  })
  .describe('A free command whose options are judged too.');

export type FreeRule = string | z.output<typeof freeRuleObject>;

/** The command words of a free rule, plain or with options. */
export function ruleCommand(rule: FreeRule): string {
  return typeof rule === 'string' ? rule : rule.command;
}

const globList = z.array(z.string().refine((g) => g.trim().length > 0, { message: 'empty pattern' }));

const positiveInt = (max: number) => z.number().int().positive().max(max);

const DEFAULT_FORBIDDEN = ['curl', 'wget', 'ssh', 'scp', 'sftp', 'rsync', 'nc', 'ncat', 'netcat', 'socat', 'telnet', 'ftp', 'git push', 'npm publish', 'yarn publish', 'pnpm publish', 'cargo publish'];

const DEFAULT_THIRD_PARTY_CLASSES: Record<string, string[]> = {
  // Executed by CI services and build tools on someone else's machine or on every build.
  ci: [
    '**/.github/**',
    '.gitlab-ci.yml',
    '**/.gitlab/**',
    '**/.circleci/**',
    'azure-pipelines*.yml',
    '**/.azure-pipelines/**',
    '**/.buildkite/**',
    'Jenkinsfile',
    'Jenkinsfile.*',
    '.drone.yml',
    '.travis.yml',
    'bitbucket-pipelines.yml',
    'Makefile',
    'makefile',
    'GNUmakefile',
    '*.mk',
    'Dockerfile',
    'Dockerfile.*',
    '*.Dockerfile',
    '.dockerignore',
    'docker-compose*.yml',
    'docker-compose*.yaml',
    'compose.yml',
    'compose.yaml',
    'compose.*.yml',
    'compose.*.yaml',
    'CMakeLists.txt',
    '*.cmake',
    'build.gradle',
    'build.gradle.kts',
    'settings.gradle',
    'settings.gradle.kts',
    'gradlew',
    'gradlew.bat',
    '**/gradle/wrapper/**',
    'mvnw',
    'mvnw.cmd',
    '**/.mvn/**',
    '**/.devcontainer/**',
    '.devcontainer.json',
    'Taskfile.yml',
    'justfile',
  ],
  // Run by git itself, or change what git does with the repository.
  vcs: ['**/.git/**', '.git', '.gitattributes', '.gitmodules', '**/.githooks/**', '**/.husky/**', '.pre-commit-config.yaml', 'lefthook.yml', 'lefthook.yaml', '.lefthook.yml', '.lefthook.yaml'],
  // Decide which code is downloaded and run at install time.
  manifests: [
    'package.json',
    'package-lock.json',
    'npm-shrinkwrap.json',
    'yarn.lock',
    '.yarnrc',
    '.yarnrc.yml',
    'pnpm-lock.yaml',
    'pnpm-workspace.yaml',
    '.pnpmfile.cjs',
    'bun.lock',
    'bun.lockb',
    '.npmrc',
    'requirements*.txt',
    'constraints*.txt',
    'pyproject.toml',
    'poetry.lock',
    'Pipfile',
    'Pipfile.lock',
    'setup.py',
    'setup.cfg',
    'uv.lock',
    'go.mod',
    'go.sum',
    'go.work',
    'go.work.sum',
    'Cargo.toml',
    'Cargo.lock',
    'pom.xml',
    'gradle.properties',
    '*.gradle.lockfile',
    'gradle.lockfile',
    'Gemfile',
    'Gemfile.lock',
    '*.gemspec',
    'composer.json',
    'composer.lock',
    '*.csproj',
    '*.fsproj',
    '*.vbproj',
    '*.sln',
    'packages.config',
    'packages.lock.json',
    'Directory.Build.props',
    'Directory.Build.targets',
    'Directory.Packages.props',
    'NuGet.config',
    'nuget.config',
    'global.json',
  ],
};

export const DEFAULT_CONTEXT_EXCLUSIONS = ['.env', '.env.*', '**/*.pem', '**/*.key', '**/secrets/**', '**/id_rsa*', '**/id_ed25519*'];

const commandsSchema = z
  .strictObject({
    default: z.enum(EFFECTS).default('ask').describe('Decision for a command that no rule names (P2: ask).'),
    free: z
      .array(z.union([commandRule('free'), freeRuleObject]))
      .default([])
      .describe('Argv prefixes that run without approval; a rule written as a mapping also says which options keep it free.'),
    readOnly: z.array(z.enum(READ_ONLY_PROGRAMS)).default([]).describe("Programs of the engine's read-only catalogue that run without approval as long as their options and scripts only read."),
    forbidden: z.array(commandRule('forbidden')).default(DEFAULT_FORBIDDEN).describe('Programs, or programs with subcommands, that are always refused.'),
    reapproval: z.enum(['always', 'exempt']).default('always').describe('`exempt`: a command identical to one already approved in the session runs without asking again.'),
    askEveryTime: z.array(commandRule('askEveryTime')).default([]).describe('Argv prefixes a person approves every time, even under `reapproval: exempt`.'),
  })
  .superRefine((commands, ctx) => {
    const forbidden = new Map(commands.forbidden.map((rule, i) => [ruleWords(rule).join(' '), i]));
    commands.free.forEach((rule, i) => {
      const text = ruleCommand(rule);
      const j = forbidden.get(ruleWords(text).join(' '));
      if (text.trim() !== '' && j !== undefined) {
        ctx.addIssue({ code: 'custom', path: ['free', i], message: `\`${text}\` is also forbidden by commands.forbidden[${j}]; a command cannot be both` });
      }
    });
  });

const toolList = z.array(z.enum(TOOL_NAMES));

const toolsSchema = z.strictObject({
  disabled: toolList.default([]).describe('Tools refused for this project; takes effect on the next action.'),
  sensitive: toolList.default(['Task']).describe('Tools that always ask, whatever the other rules say.'),
});

const thirdPartySchema = z.strictObject({
  mode: z.enum(['forbid', 'approve']).default('forbid').describe('forbid: refuse changes to third-party files; approve: ask with a dedicated, flagged approval.'),
  classes: z.record(z.string().regex(/^[A-Za-z][A-Za-z0-9_-]*$/, 'a class name is a letter followed by letters, digits, - or _'), globList).default(DEFAULT_THIRD_PARTY_CLASSES),
  binary: z.boolean().default(true).describe('Binary content is a third-party change.'),
  maxDiffBytes: positiveInt(1024 * 1024 * 1024)
    .default(1024 * 1024)
    .describe('A diff larger than this is a third-party change.'),
  symlinksOutside: z
    .enum(['forbid', 'approve'])
    .default('forbid')
    .describe(
      'A symbolic link a command leaves behind that points outside the working copy (absolute, or escaping with ".." or through other links). forbid: reverted at once; approve: a dedicated, flagged approval.',
    ),
});

// Each value is a ceiling (P1, L5): a workstation may lower it, never raise it.
const executionSchema = z.strictObject({
  sessionMaxActions: positiveInt(100_000).default(150),
  sessionMaxMinutes: positiveInt(24 * 60).default(45),
  sessionMaxExtensions: z.number().int().min(0).max(1000).default(5),
  toolLoopThreshold: z.number().int().min(2).max(1000).default(3),
  toolLoopDetection: z.boolean().default(true),
  allowToolLoopDetectionOff: z.boolean().default(false).describe('Whether an agent file, configuration or environment variable of a workstation may set toolLoopDetection: false.'),
  // Zero is refused (AG4): a cascade limit is adjusted, never removed; 1 forbids nesting.
  subagentMaxDepth: z.number().int().min(1).max(32).default(3),
  subagentMaxPerSession: z.number().int().min(1).max(100_000).default(200),
  subagentMaxConcurrent: z.number().int().min(1).max(1000).default(20),
});

/** How long a person has to answer an approval before it expires (L1, X4): 30 minutes unless set. */
export const DEFAULT_APPROVAL_TIMEOUT_SECONDS = 30 * 60;

const approvalsSchema = z.strictObject({
  timeoutSeconds: positiveInt(24 * 3600)
    .optional()
    .describe(
      'Seconds a pending approval waits for a person; then it expires and the session stops at its time limit. Default 1800 (30 minutes), never more than the session duration limit (execution.sessionMaxMinutes).',
    ),
});

const sandboxSchema = z.strictObject({
  runtime: z.enum(['runc', 'runsc']).default('runc'),
  cpus: z.number().positive().max(256).default(2),
  memoryMb: positiveInt(1024 * 1024).default(2048),
  pids: positiveInt(1_000_000).default(256),
  diskMb: positiveInt(10 * 1024 * 1024).default(2048),
  commandTimeoutSeconds: positiveInt(24 * 3600).default(600),
});

const environmentSchema = z.strictObject({
  mirrors: z
    .array(
      z.string().refine(
        (s) => {
          try {
            const u = new URL(s);
            return (u.protocol === 'http:' || u.protocol === 'https:') && !u.username && !u.password && !u.search && !u.hash;
          } catch {
            return false;
          }
        },
        { message: 'must be an http:// or https:// URL without credentials, query or fragment' },
      ),
    )
    .max(50)
    .default([])
    .describe(
      "Package mirrors the project's environment set-up (devcontainer build and set-up commands) may reach, e.g. https://registry.npmjs.org/. Nothing else resolves or connects; agent sessions never have network.",
    ),
  setupTimeoutSeconds: positiveInt(6 * 3600)
    .default(1800)
    .describe('Time allowed for all set-up commands of one preparation.'),
});

export const policySchema = z
  .strictObject({
    version: z.literal(1, { error: 'unsupported version: this engine reads policy documents of version 1' }),
    commands: commandsSchema.prefault({}),
    tools: toolsSchema.prefault({}),
    thirdPartyFiles: thirdPartySchema.prefault({}),
    contextExclusions: globList.default(DEFAULT_CONTEXT_EXCLUSIONS).describe('Files never copied into the sandbox nor shown to the model.'),
    execution: executionSchema.prefault({}),
    approvals: approvalsSchema.prefault({}),
    sandbox: sandboxSchema.prefault({}),
    environment: environmentSchema.prefault({}),
    mcp: mcpSchema.prefault({}),
  })
  .superRefine((policy, ctx) => {
    const timeout = policy.approvals.timeoutSeconds;
    const limit = policy.execution.sessionMaxMinutes * 60;
    if (timeout !== undefined && timeout > limit) {
      ctx.addIssue({
        code: 'custom',
        path: ['approvals', 'timeoutSeconds'],
        message: `${timeout} seconds is longer than the session duration limit (execution.sessionMaxMinutes: ${policy.execution.sessionMaxMinutes} minutes, ${limit} seconds); an approval cannot wait longer than its session lives`,
      });
    }
  })
  .describe('Lemniscate project policy');

/**
 * The wait of one approval under a policy: `approvals.timeoutSeconds`, or 30 minutes, and never
 * more than the session duration limit.
 */
export function approvalTimeoutSeconds(policy: Pick<Policy, 'approvals' | 'execution'>): number {
  return Math.min(policy.approvals.timeoutSeconds ?? DEFAULT_APPROVAL_TIMEOUT_SECONDS, policy.execution.sessionMaxMinutes * 60);
}

export type Policy = z.output<typeof policySchema>;
export type PolicyInput = z.input<typeof policySchema>;

/** JSON Schema of the document an administrator writes (fields with defaults are optional). */
export const policyJsonSchema: Record<string, unknown> = z.toJSONSchema(policySchema, { io: 'input', unrepresentable: 'any' });

export interface PolicyIssue {
  path: string;
  message: string;
}

export class PolicyValidationError extends Error {
  readonly issues: PolicyIssue[];

  constructor(issues: PolicyIssue[]) {
    super(`Invalid policy: ${issues.map((i) => (i.path ? `${i.path}: ${i.message}` : i.message)).join('; ')}`);
    this.name = 'PolicyValidationError';
    this.issues = issues;
  }
}

/** `commands.free[3]` from `['commands', 'free', 3]`. */
export function formatPath(path: readonly PropertyKey[]): string {
  let out = '';
  for (const key of path) {
    if (typeof key === 'number') out += `[${key}]`;
    else out += out === '' ? String(key) : `.${String(key)}`;
  }
  return out;
}

function describeValue(value: unknown): string {
  if (value === undefined) return 'nothing';
  if (value === null) return 'null';
  if (Array.isArray(value)) return 'a list';
  return typeof value === 'object' ? 'a mapping' : `${typeof value} ${JSON.stringify(value)}`;
}

function valueAt(input: unknown, path: readonly PropertyKey[]): unknown {
  let current = input;
  for (const key of path) {
    if (current === null || typeof current !== 'object') return undefined;
    current = (current as Record<PropertyKey, unknown>)[key];
  }
  return current;
}

function toIssues(error: z.ZodError, input: unknown): PolicyIssue[] {
  const issues: PolicyIssue[] = [];
  for (const issue of error.issues) {
    const path = formatPath(issue.path);
    switch (issue.code) {
      case 'unrecognized_keys':
        for (const key of issue.keys) issues.push({ path: formatPath([...issue.path, key]), message: 'unknown key (check its spelling against the policy reference)' });
        break;
      case 'invalid_type': {
        const actual = valueAt(input, issue.path);
        const expected = issue.expected === 'object' ? 'a mapping' : issue.expected === 'array' ? 'a list' : `a ${issue.expected}`;
        issues.push({ path, message: actual === undefined ? `required: expected ${expected}` : `expected ${expected}, got ${describeValue(actual)}` });
        break;
      }
      case 'invalid_value':
        issues.push({
          path,
          message: issue.values.length === 1 && issue.path.length === 1 && issue.path[0] === 'version' ? issue.message : `must be one of ${issue.values.map((v) => String(v)).join(', ')}`,
        });
        break;
      case 'too_small':
        issues.push({ path, message: `must be ${issue.inclusive ? 'at least' : 'greater than'} ${String(issue.minimum)}` });
        break;
      case 'too_big':
        issues.push({ path, message: `must be ${issue.inclusive ? 'at most' : 'less than'} ${String(issue.maximum)}` });
        break;
      case 'invalid_key':
        issues.push({ path, message: `invalid name: ${issue.issues.map((i) => i.message).join('; ')}` });
        break;
      default:
        issues.push({ path, message: issue.message });
    }
  }
  return issues;
}

function deepFreeze<T>(value: T): T {
  if (value !== null && typeof value === 'object' && !Object.isFrozen(value)) {
    Object.freeze(value);
    for (const v of Object.values(value)) deepFreeze(v);
  }
  return value;
}

function readDocument(text: string): unknown {
  // YAML 1.2 is a superset of JSON, so one reader serves both formats.
  const doc = parseDocument(text, { uniqueKeys: true, prettyErrors: true });
  if (doc.errors.length > 0) {
    throw new PolicyValidationError(
      doc.errors.map((e) => {
        const pos = e.linePos?.[0];
        const where = pos ? `line ${pos.line}, column ${pos.col}` : 'document';
        const first = (e.message.split('\n')[0] ?? e.message).replace(/ at line \d+, column \d+:?$/, '');
        return { path: '', message: `${where}: ${first}` };
      }),
    );
  }
  try {
    return doc.toJS({ maxAliasCount: 100 });
  } catch (error) {
    // The yaml package refuses alias expansions that would exhaust memory ("billion laughs").
    if (error instanceof ReferenceError && /alias/i.test(error.message)) {
      throw new PolicyValidationError([
        { path: '', message: 'document: its aliases (*name) expand to more than 100 copies, which is how a document exhausts memory; write the repeated values out instead' },
      ]);
    }
    throw new PolicyValidationError([{ path: '', message: `document: it cannot be read (${error instanceof Error ? error.message : String(error)})` }]);
  }
}

/**
 * Validates a policy document (YAML or JSON text, or an already parsed value) and returns it with
 * every default filled in. The result is frozen: the engine caches work per policy object.
 */
export function parsePolicy(input: unknown): Policy {
  const value = typeof input === 'string' ? readDocument(input) : input;
  if (value === null || value === undefined || typeof value !== 'object' || Array.isArray(value)) {
    throw new PolicyValidationError([{ path: '', message: `a policy is a mapping with at least \`version: 1\`, got ${describeValue(value)}` }]);
  }
  const result = policySchema.safeParse(value);
  if (!result.success) throw new PolicyValidationError(toIssues(result.error, value));
  return deepFreeze(result.data);
}

/** P2: nothing is free, network tools and publishing are forbidden, every change goes to a person. */
export const defaultPolicy: Policy = parsePolicy({ version: 1 });

// Options of test runners that load code or configuration from a place of their choosing. The
// package-manager scripts (`npm test`) pass what follows `--` on to whatever runner the project
// uses, so they ask for these too.
const RUNNER_CODE_OPTIONS = [
  '--config',
  '-c',
  '--configLoader',
  '--globalSetup',
  '--globalTeardown',
  '--setupFiles',
  '--setupFilesAfterEnv',
  '--testRunner',
  '--runner',
  '--transform',
  '--preset',
  '--resolver',
  '--reporters',
  '--reporter',
  '--testEnvironment',
  '--environment',
  '--testSequencer',
  '--snapshotResolver',
  '--testResultsProcessor',
  '--watchPlugins',
  '--rootDir',
  '--roots',
  '--root',
  '--dir',
  '--workspace',
  '--require',
  '-r',
  '--import',
  '--loader',
  '--experimental-loader',
  '--node-options',
  '--filter',
  '--moduleDirectories',
  '--modulePaths',
  '--projects',
  '--plugin',
  '--plugins',
  '--api',
  '--ui',
  '--browser',
  '--inspect',
  '--inspect-brk',
];
// npm's own options before `--` (anything else is a configuration key, such as --script-shell).
const NPM_OPTIONS = [
  '--silent',
  '-s',
  '--quiet',
  '-q',
  '--workspace',
  '-w',
  '--workspaces',
  '--ws',
  '--if-present',
  '--include-workspace-root',
  '--loglevel',
  '--color',
  '--no-color',
  '--foreground-scripts',
];
const NPM_ASK = [...RUNNER_CODE_OPTIONS, '--script-shell', '--shell', '--userconfig', '--globalconfig', '--prefix', '--call', '--editor', '--git', '--node-gyp', '--init-module'];

const GO_BUILD_OPTIONS = ['-v', '-x', '-n', '-a', '-race', '-msan', '-asan', '-cover', '-covermode', '-coverpkg', '-tags', '-p', '-mod', '-trimpath', '-buildvcs', '-work', '-json'];
const GO_ASK = [
  '-exec',
  '-toolexec',
  '-modfile',
  '-overlay',
  '-pgo',
  '-ldflags',
  '-gcflags',
  '-asmflags',
  '-gccgoflags',
  '-compiler',
  '-pkgdir',
  '-installsuffix',
  '-buildmode',
  '-linkshared',
  '-vettool',
  '-args',
];
const GO_TEST_OPTIONS = [
  ...GO_BUILD_OPTIONS,
  '-run',
  '-count',
  '-short',
  '-timeout',
  '-bench',
  '-benchmem',
  '-benchtime',
  '-parallel',
  '-failfast',
  '-list',
  '-skip',
  '-cpu',
  '-shuffle',
  '-coverprofile',
  '-fuzz',
  '-fuzztime',
  '-vet',
  '-o',
  '-c',
  '-outputdir',
];

const CARGO_OPTIONS = [
  '--release',
  '--all',
  '--workspace',
  '-p',
  '--package',
  '--exclude',
  '--lib',
  '--bins',
  '--bin',
  '--tests',
  '--test',
  '--benches',
  '--bench',
  '--examples',
  '--example',
  '--all-targets',
  '--doc',
  '--no-run',
  '--no-fail-fast',
  '--all-features',
  '--features',
  '-F',
  '--no-default-features',
  '--target',
  '--target-dir',
  '-j',
  '--jobs',
  '-q',
  '--quiet',
  '-v',
  '--verbose',
  '--locked',
  '--offline',
  '--frozen',
  '--message-format',
  '--color',
  '--profile',
  '-r',
  '--keep-going',
  '--timings',
];
const CARGO_ASK = ['--config', '-Z', '--manifest-path'];

const MAKE_OPTIONS = ['-j', '--jobs', '-k', '--keep-going', '-s', '--silent', '--quiet', '-O', '--output-sync', '-w', '--print-directory', '--no-print-directory', '-B', '--always-make'];
const MAKE_ASK = ['-f', '--file', '--makefile', '-e', '--environment-overrides', '--eval', '-E', '-I', '--include-dir', '-C', '--directory'];

const JEST_OPTIONS = [
  '--ci',
  '--coverage',
  '--runInBand',
  '-i',
  '--verbose',
  '--silent',
  '--selectProjects',
  '--testNamePattern',
  '-t',
  '--testPathPattern',
  '--testPathPatterns',
  '--testPathIgnorePatterns',
  '--bail',
  '-b',
  '--maxWorkers',
  '-w',
  '--passWithNoTests',
  '--onlyChanged',
  '-o',
  '--changedSince',
  '--json',
  '--colors',
  '--detectOpenHandles',
  '--forceExit',
  '--listTests',
  '--no-cache',
  '--updateSnapshot',
  '-u',
  '--shard',
  '--testTimeout',
  '--logHeapUsage',
  '--findRelatedTests',
  '--randomize',
  '--seed',
  '--showSeed',
  '--errorOnDeprecated',
  '--expand',
  '-e',
  '--noStackTrace',
  '--no-coverage',
  '--clearMocks',
];
const VITEST_OPTIONS = [
  '--coverage',
  '--reporter',
  '-t',
  '--testNamePattern',
  '--bail',
  '--silent',
  '--passWithNoTests',
  '--changed',
  '--shard',
  '--sequence',
  '--no-color',
  '--run',
  '--allowOnly',
  '--update',
  '-u',
  '--testTimeout',
  '--maxWorkers',
  '--minWorkers',
  '--no-file-parallelism',
  '--project',
];

const PYTEST_ASK = [
  '-c',
  '--config-file',
  '--inifile',
  '-p',
  '--basetemp',
  '--rootdir',
  '--confcutdir',
  '-o',
  '--override-ini',
  '--pdb',
  '--pdbcls',
  '--trace',
  '--debug',
  '--import-mode',
  '--pyargs',
  '--noconftest',
];
const GRADLE_ASK = [
  '-I',
  '--init-script',
  '-D',
  '--system-prop',
  '-P',
  '--project-prop',
  '-c',
  '--settings-file',
  '-b',
  '--build-file',
  '-g',
  '--gradle-user-home',
  '--include-build',
  '--project-cache-dir',
  '-p',
  '--project-dir',
];
const MVN_OPTIONS = [
  '-B',
  '--batch-mode',
  '-q',
  '--quiet',
  '-e',
  '--errors',
  '-X',
  '--debug',
  '-o',
  '--offline',
  '-U',
  '--update-snapshots',
  '-ntp',
  '--no-transfer-progress',
  '-pl',
  '--projects',
  '-am',
  '--also-make',
  '-T',
  '--threads',
  '-fae',
  '--fail-at-end',
  '-ff',
  '--fail-fast',
  '-nsu',
  '-P',
  '--activate-profiles',
  '-V',
  '--show-version',
];
const MVN_ASK = ['-D', '--define', '-f', '--file', '-s', '--settings', '-gs', '--global-settings', '-t', '--toolchains', '-gt', '--global-toolchains', '-l', '--log-file', '-emp', '-ep'];
const DOTNET_ASK = [
  '-p',
  '--property',
  '-property',
  '-l',
  '--logger',
  '-a',
  '--test-adapter-path',
  '-s',
  '--settings',
  '--collect',
  '-d',
  '--diag',
  '--source',
  '--configfile',
  '--runtime',
  '-r',
  '--blame',
  '--blame-hang',
  '--blame-crash',
  '--environment',
  '-e',
  '--arch',
  '--os',
];

type RuleInput = z.input<typeof freeRuleObject>;
const withOptions = (commands: string[], options: { allow?: string[]; ask?: string[] }, more: Partial<RuleInput> = {}): RuleInput[] => commands.map((command) => ({ command, options, ...more }));

/**
 * The usual build, test, lint and format commands of common ecosystems are free — with the options
 * that keep them from running a program of the caller's choosing — and so is read-only inspection.
 */
export const recommendedPolicy: Policy = parsePolicy({
  version: 1,
  commands: {
    default: 'ask',
    free: [
      ...withOptions(['npm test', 'npm run test', 'npm run lint', 'npm run build', 'npm run typecheck', 'npm run format:check'], { allow: NPM_OPTIONS, ask: NPM_ASK }),
      ...withOptions(['yarn test', 'yarn lint', 'yarn build', 'yarn run test', 'yarn run lint', 'yarn run build'], { ask: NPM_ASK }),
      ...withOptions(['pnpm test', 'pnpm lint', 'pnpm build', 'pnpm run test', 'pnpm run lint', 'pnpm run build'], { ask: NPM_ASK }),
      ...withOptions(['tsc', 'npx tsc'], { ask: ['--plugins', '--generateTrace'] }),
      ...withOptions(['eslint', 'npx eslint'], { ask: ['--rulesdir', '--resolve-plugins-relative-to'] }),
      ...withOptions(['prettier --check', 'npx prettier --check'], { ask: ['--write', '-w', '--plugin', '--plugin-search-dir'] }),
      ...withOptions(['jest', 'npx jest'], { allow: JEST_OPTIONS, ask: RUNNER_CODE_OPTIONS }),
      ...withOptions(['vitest run', 'npx vitest run'], { allow: VITEST_OPTIONS, ask: RUNNER_CODE_OPTIONS }),
      ...withOptions(['pytest', 'python -m pytest', 'python3 -m pytest'], { ask: PYTEST_ASK }),
      ...withOptions(['ruff check', 'ruff format --check'], { ask: ['--unsafe-fixes', '--add-noqa'] }),
      ...withOptions(['mypy', 'python -m mypy', 'python3 -m mypy'], { ask: ['--python-executable', '--shadow-file', '--plugins'] }),
      ...withOptions(['go build'], { allow: [...GO_BUILD_OPTIONS, '-o'], ask: GO_ASK }),
      ...withOptions(['go test'], { allow: GO_TEST_OPTIONS, ask: GO_ASK }),
      ...withOptions(['go vet'], { allow: ['-v', '-x', '-n', '-tags', '-json', '-mod', '-C'], ask: GO_ASK }),
      ...withOptions(['gofmt -l'], { ask: ['-w'] }),
      ...withOptions(['cargo build', 'cargo test', 'cargo check', 'cargo clippy'], { allow: CARGO_OPTIONS, ask: CARGO_ASK }),
      ...withOptions(['cargo fmt --check'], { ask: CARGO_ASK }),
      ...withOptions(['mvn compile', 'mvn test', 'mvn verify', './mvnw test'], { allow: MVN_OPTIONS, ask: MVN_ASK }),
      ...withOptions(['gradle build', 'gradle test', 'gradle check', './gradlew build', './gradlew test', './gradlew check'], { ask: GRADLE_ASK }),
      ...withOptions(['dotnet build', 'dotnet test'], { ask: DOTNET_ASK }),
      ...withOptions(['dotnet format --verify-no-changes'], { ask: DOTNET_ASK }),
      ...withOptions(['make test'], { allow: MAKE_OPTIONS, ask: MAKE_ASK }, { assignments: 'ask' }),
    ],
    readOnly: [...READ_ONLY_PROGRAMS],
    forbidden: DEFAULT_FORBIDDEN,
    reapproval: 'exempt',
  },
});
