import { describeValue } from './describe-value';

/**
 * Execution configuration (L5, AG4): the limits that bound a session, resolved from four layers,
 * defaults < environment < configuration < agent frontmatter. A value that cannot be read stops
 * everything with a sentence naming where it came from: falling back to the default would run a
 * session under limits nobody chose.
 */

export interface ExecutionConfig {
  /** Tool calls plus context compactions allowed in one session (L1). */
  sessionMaxActions: number;
  /** Wall-clock minutes allowed in one session (L1). */
  sessionMaxMinutes: number;
  /** Extensions a person may grant in one session (L2); 0 means none. */
  sessionMaxExtensions: number;
  /** Identical consecutive calls tolerated; the next one is blocked (L6). */
  toolLoopThreshold: number;
  /** Loop detection is off only when this is the boolean `false` (L6). */
  toolLoopDetection: boolean;
  /** Delegation depth below the main session; 1 forbids nesting (AG4). */
  subagentMaxDepth: number;
  /** Subagents one session tree may start in total (AG4). */
  subagentMaxPerSession: number;
  /** Subagents of one session tree running at the same time (AG4). */
  subagentMaxConcurrent: number;
  /** Context size, in tokens, above which older turns are summarised (each compaction is an action). */
  contextTokenBudget: number;
}

export type ExecutionKey = keyof ExecutionConfig;

export const EXECUTION_DEFAULTS: Readonly<ExecutionConfig> = Object.freeze({
  sessionMaxActions: 150,
  sessionMaxMinutes: 45,
  sessionMaxExtensions: 5,
  toolLoopThreshold: 3,
  toolLoopDetection: true,
  subagentMaxDepth: 3,
  subagentMaxPerSession: 200,
  subagentMaxConcurrent: 20,
  contextTokenBudget: 100_000,
});

type KeySpec = { kind: 'count'; env: string; unit: string; min: 0 | 1; max: number } | { kind: 'flag'; env: string };

// Minutes become a timer in the gateway; Node timers overflow past 2^31-1 ms (about 24.8 days).
const MAX_TIMER_MINUTES = Math.floor((2 ** 31 - 1) / 60_000);

const KEYS: Readonly<Record<ExecutionKey, KeySpec>> = {
  sessionMaxActions: { kind: 'count', env: 'LEMNISCATE_SESSION_MAX_ACTIONS', unit: 'actions', min: 1, max: Number.MAX_SAFE_INTEGER },
  sessionMaxMinutes: { kind: 'count', env: 'LEMNISCATE_SESSION_MAX_MINUTES', unit: 'minutes', min: 1, max: MAX_TIMER_MINUTES },
  sessionMaxExtensions: { kind: 'count', env: 'LEMNISCATE_SESSION_MAX_EXTENSIONS', unit: 'extensions', min: 0, max: Number.MAX_SAFE_INTEGER },
  toolLoopThreshold: { kind: 'count', env: 'LEMNISCATE_SESSION_TOOL_LOOP_THRESHOLD', unit: 'repetitions', min: 1, max: Number.MAX_SAFE_INTEGER },
  toolLoopDetection: { kind: 'flag', env: 'LEMNISCATE_SESSION_TOOL_LOOP_DETECTION' },
  subagentMaxDepth: { kind: 'count', env: 'LEMNISCATE_SESSION_SUBAGENT_MAX_DEPTH', unit: 'levels', min: 1, max: Number.MAX_SAFE_INTEGER },
  subagentMaxPerSession: { kind: 'count', env: 'LEMNISCATE_SESSION_SUBAGENT_MAX_PER_SESSION', unit: 'subagents', min: 1, max: Number.MAX_SAFE_INTEGER },
  subagentMaxConcurrent: { kind: 'count', env: 'LEMNISCATE_SESSION_SUBAGENT_MAX_CONCURRENT', unit: 'subagents', min: 1, max: Number.MAX_SAFE_INTEGER },
  contextTokenBudget: { kind: 'count', env: 'LEMNISCATE_SESSION_CONTEXT_TOKEN_BUDGET', unit: 'tokens', min: 1, max: Number.MAX_SAFE_INTEGER },
};

export const EXECUTION_KEYS = Object.keys(KEYS) as readonly ExecutionKey[];

/** The environment variable that can set each key, e.g. `LEMNISCATE_SESSION_MAX_ACTIONS`. */
export const EXECUTION_ENV: Readonly<Record<ExecutionKey, string>> = Object.fromEntries(EXECUTION_KEYS.map((key) => [key, KEYS[key].env])) as Record<ExecutionKey, string>;

/** Where a value was read, for messages and for the audit of a session's start. */
export type ExecutionSource = { layer: 'default' } | { layer: 'environment'; variable: string } | { layer: 'configuration'; location: string } | { layer: 'agent'; location: string };

export class ExecutionConfigError extends Error {
  readonly code = 'execution_config_invalid';
  constructor(
    message: string,
    /** The variable or file the value came from. */
    readonly source: string,
    readonly key: string,
    readonly value: string,
  ) {
    super(message);
    this.name = 'ExecutionConfigError';
  }
}

/** One `execution:` mapping and where it was read (a policy version, `~/.lemniscate/config.yaml`, …). */
export interface ExecutionLayer {
  location: string;
  /** The parsed `execution:` value, not yet trusted. */
  values: unknown;
}

export interface ResolveExecutionInput {
  env?: Readonly<Record<string, string | undefined>>;
  /** Configuration layers, lowest precedence first. */
  config?: readonly ExecutionLayer[];
  /** The agent's frontmatter, which wins over everything else (AG2). */
  agent?: ExecutionLayer;
  /**
   * The administrator's values (P1): the project policy's `execution:` block, every key with its
   * default filled in. Each is a ceiling for the layers above: a lower value wins (L5), a higher one
   * is refused, and a key no layer sets takes the policy's value.
   */
  ceilings?: ExecutionCeilings;
}

/** The project policy's `execution:` values, read as ceilings for a workstation's values (P1, L5). */
export interface ExecutionCeilings {
  /** Where the ceilings come from, e.g. `the policy of project "shop" (version 3)`. */
  location: string;
  values: Partial<Omit<ExecutionConfig, 'contextTokenBudget'>>;
  /** Whether a workstation may switch loop detection off (policy `execution.allowToolLoopDetectionOff`). */
  allowToolLoopDetectionOff: boolean;
}

export interface ResolvedExecution {
  config: ExecutionConfig;
  origin: Readonly<Record<ExecutionKey, ExecutionSource>>;
  /** Sentences about keys that were present but mean nothing here (a typo is worth a look). */
  warnings: readonly string[];
}

export function resolveExecutionConfig(input: ResolveExecutionInput = {}): ResolvedExecution {
  const config: ExecutionConfig = { ...EXECUTION_DEFAULTS };
  const origin = Object.fromEntries(EXECUTION_KEYS.map((key) => [key, { layer: 'default' }])) as Record<ExecutionKey, ExecutionSource>;
  const warnings: string[] = [];

  const env = input.env ?? {};
  for (const key of EXECUTION_KEYS) {
    const variable = KEYS[key].env;
    const raw = env[variable];
    if (raw === undefined) continue;
    assign(config, key, readEnvironmentValue(key, variable, raw));
    origin[key] = { layer: 'environment', variable };
  }

  const layers: Array<{ layer: 'configuration' | 'agent'; from: ExecutionLayer }> = [
    ...(input.config ?? []).map((from) => ({ layer: 'configuration' as const, from })),
    ...(input.agent ? [{ layer: 'agent' as const, from: input.agent }] : []),
  ];
  for (const { layer, from } of layers) {
    const values = readExecutionMapping(from, warnings);
    for (const [key, value] of values) {
      assign(config, key, value);
      origin[key] = { layer, location: from.location };
    }
  }

  if (input.ceilings) {
    const { ceilings } = input;
    for (const key of EXECUTION_KEYS) {
      const ceiling = (ceilings.values as Partial<Record<ExecutionKey, number | boolean>>)[key];
      if (ceiling === undefined) continue;
      const source = origin[key];
      if (source.layer === 'default') {
        assign(config, key, ceiling);
        origin[key] = { layer: 'configuration', location: ceilings.location };
        continue;
      }
      const { shown, from } = describeSource(key, source, config[key]);
      checkCeiling(key, config[key], shown, from, ceilings);
    }
  }

  return { config, origin, warnings };
}

/**
 * Refuses a value a workstation (environment, configuration, agent frontmatter) sets above the
 * administrator's ceiling, or a `toolLoopDetection: false` the policy does not allow (P1). The
 * sentence names the value, where it came from and the ceiling. `shown` is how the value was
 * written, e.g. `LEMNISCATE_SESSION_MAX_ACTIONS=500` or `sessionMaxActions: 500 in ~/.lemniscate/config.yaml`.
 */
function checkCeiling(key: ExecutionKey, value: number | boolean, shown: string, source: string, ceilings: ExecutionCeilings): void {
  const ceiling = (ceilings.values as Partial<Record<ExecutionKey, number | boolean>>)[key];
  if (ceiling === undefined) return;
  const spec = KEYS[key];
  if (spec.kind === 'flag') {
    if (value === false && ceiling === true && !ceilings.allowToolLoopDetectionOff) {
      throw new ExecutionConfigError(
        `${shown} is refused: ${ceilings.location} keeps loop detection on and does not allow a workstation to switch it off (execution.allowToolLoopDetectionOff); remove it, or ask an administrator.`,
        source,
        key,
        String(value),
      );
    }
    return;
  }
  if (typeof value === 'number' && typeof ceiling === 'number' && value > ceiling) {
    throw new ExecutionConfigError(
      `${shown} is refused: ${ceilings.location} sets the ceiling execution.${key} at ${ceiling} ${spec.unit}, and a workstation may lower a limit but never raise it; use ${ceiling} or less, or ask an administrator to raise the ceiling.`,
      source,
      key,
      String(value),
    );
  }
}

function describeSource(key: ExecutionKey, source: ExecutionSource, value: number | boolean): { shown: string; from: string } {
  switch (source.layer) {
    case 'environment':
      return { shown: `${source.variable}=${String(value)}`, from: source.variable };
    case 'configuration':
    case 'agent':
      return { shown: `${key}: ${String(value)} in ${source.location}`, from: source.location };
    default:
      return { shown: `${key}: ${String(value)}`, from: 'default' };
  }
}

/**
 * Checks a subagent's frontmatter (applied over its session tree's execution) against the same
 * ceilings: a delegated agent cannot lift what the administrator set either (P1, AG4).
 */
export function checkLayerCeilings(execution: Partial<ExecutionConfig>, location: string, ceilings: ExecutionCeilings): void {
  for (const key of EXECUTION_KEYS) {
    const value = execution[key];
    if (value === undefined) continue;
    checkCeiling(key, value, `${key}: ${String(value)} in ${location}`, location, ceilings);
  }
}

/**
 * Reads and checks one mapping of execution keys (also used for agent frontmatter). Unknown keys
 * are reported in `warnings` rather than refused: the same `execution:` block may carry keys that
 * other parts of the platform read.
 */
export function readExecutionMapping(layer: ExecutionLayer, warnings: string[] = []): Array<[ExecutionKey, number | boolean]> {
  const { location, values } = layer;
  if (values === undefined || values === null) return [];
  if (typeof values !== 'object' || Array.isArray(values)) {
    throw new ExecutionConfigError(
      `execution in ${location} must be a mapping of keys such as sessionMaxActions, not ${describeValue(values)}; fix or remove it.`,
      location,
      'execution',
      describeValue(values),
    );
  }
  const out: Array<[ExecutionKey, number | boolean]> = [];
  for (const [key, value] of Object.entries(values)) {
    if (!isExecutionKey(key)) {
      warnings.push(`${key} in ${location} is not an execution setting this version knows; it is ignored.`);
      continue;
    }
    out.push([key, readConfiguredValue(key, location, value)]);
  }
  return out;
}

export function isExecutionKey(key: string): key is ExecutionKey {
  return Object.prototype.hasOwnProperty.call(KEYS, key);
}

function assign(config: ExecutionConfig, key: ExecutionKey, value: number | boolean): void {
  (config as unknown as Record<ExecutionKey, number | boolean>)[key] = value;
}

function readEnvironmentValue(key: ExecutionKey, variable: string, raw: string): number | boolean {
  const spec = KEYS[key];
  const shown = `${variable}=${raw}`;
  const fail = (why: string) => new ExecutionConfigError(`${shown} ${why}; fix or unset it.`, variable, key, raw);
  if (raw.trim() === '') throw fail('is set but empty');
  if (spec.kind === 'flag') {
    if (raw === 'true') return true;
    if (raw === 'false') return false;
    throw fail('is not true or false');
  }
  if (!/^[0-9]+$/.test(raw)) throw fail(`is not a whole number of ${spec.unit}`);
  return checkCount(spec, Number(raw), fail);
}

function readConfiguredValue(key: ExecutionKey, location: string, value: unknown): number | boolean {
  const spec = KEYS[key];
  const shown = describeValue(value);
  const fail = (why: string) => new ExecutionConfigError(`${key}: ${shown} in ${location} ${why}; fix or remove it.`, location, key, shown);
  if (spec.kind === 'flag') {
    if (typeof value === 'boolean') return value;
    throw fail('is not true or false');
  }
  if (typeof value !== 'number' || !Number.isInteger(value) || value < 0) throw fail(`is not a whole number of ${spec.unit}`);
  return checkCount(spec, value, fail);
}

function checkCount(spec: Extract<KeySpec, { kind: 'count' }>, value: number, fail: (why: string) => ExecutionConfigError): number {
  if (value < spec.min) throw fail('is refused: a limit is adjusted, never removed, so the smallest value is 1');
  if (!Number.isSafeInteger(value) || value > spec.max) throw fail(`is more than the largest accepted value (${spec.max} ${spec.unit})`);
  return value;
}
