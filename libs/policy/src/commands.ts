import type { Decision } from './decision';
import { judgeOptions, type OptionFinding, type OptionRule } from './options';
import { readOnlyProblem } from './read-only';
import type { ReadOnlyProgram } from './read-only-programs';
import type { FreeRule, Policy } from './schema';
import { ruleCommand, ruleWords } from './schema';
import type { CommandPart } from './shell/parts';
import { programName } from './shell/wrappers';
import type { Word } from './shell/words';

interface Rule {
  index: number;
  words: string[];
  text: string;
  /** Set on a free rule written as a mapping: its options are judged too. */
  options?: OptionRule;
}

interface CompiledCommands {
  free: Map<string, Rule[]>;
  forbidden: Map<string, Rule[]>;
  askEveryTime: Map<string, Rule[]>;
  /** Program name → its index in commands.readOnly. */
  readOnly: Map<string, number>;
  /** Programs some free or read-only rule names: their help and version run freely. */
  known: Set<string>;
}

const compiled = new WeakMap<object, CompiledCommands>();

function group(rules: readonly FreeRule[], key: (first: string) => string): Map<string, Rule[]> {
  const map = new Map<string, Rule[]>();
  rules.forEach((rule, index) => {
    const words = ruleWords(ruleCommand(rule));
    const first = words[0];
    if (first === undefined) return;
    const k = key(first);
    const list = map.get(k) ?? [];
    const options: OptionRule | undefined = typeof rule === 'string' ? undefined : { allow: rule.options.allow, ask: rule.options.ask, assignments: rule.assignments, paths: rule.paths };
    list.push({ index, words, text: words.join(' '), ...(options ? { options } : {}) });
    map.set(k, list);
  });
  return map;
}

/** Indexes rules by program so a decision looks at a handful of rules, not all of them. */
function compile(policy: Policy): CompiledCommands {
  const key = policy.commands;
  let c = compiled.get(key);
  if (!c) {
    c = {
      free: group(policy.commands.free, (w) => w),
      forbidden: group(policy.commands.forbidden, programName),
      askEveryTime: group(policy.commands.askEveryTime, programName),
      readOnly: new Map(policy.commands.readOnly.map((name, index) => [name, index])),
      known: new Set([...policy.commands.free.map((r) => programName(ruleWords(ruleCommand(r))[0] ?? '')), ...policy.commands.readOnly]),
    };
    compiled.set(key, c);
  }
  return c;
}

/** The command as it was typed, quotes and escapes included, so the reason shows what will run. */
function show(argv: Word[], max = 80): string {
  const s = argv.map((w) => w.text).join(' ');
  return s.length > max ? `${s.slice(0, max - 1)}…` : s;
}

// Options of git that take a value, so `git -C dir push` is still `git push`.
const VALUED_GLOBAL_OPTIONS: Record<string, Set<string>> = {
  git: new Set(['-C', '-c', '--git-dir', '--work-tree', '--namespace', '--exec-path', '--config-env']),
  npm: new Set(['--prefix', '--registry', '--userconfig', '-w', '--workspace']),
  cargo: new Set(['--manifest-path', '--config', '-Z', '--color']),
};

/** The words after the program that are not options (`git -C x push -f` → `push`). */
function positionals(program: string, args: Word[]): (string | null)[] {
  const valued = VALUED_GLOBAL_OPTIONS[program];
  const out: (string | null)[] = [];
  for (let i = 0; i < args.length; i++) {
    const v = (args[i] as Word).value;
    if (v !== null && v.startsWith('-') && v.length > 1) {
      if (valued?.has(v)) i++;
      continue;
    }
    out.push(v);
  }
  return out;
}

type ForbiddenMatch = { rule: Rule; certain: boolean } | null;

function matchForbidden(argv: Word[], rules: Rule[], program: string): ForbiddenMatch {
  const args = argv.slice(1);
  const pos = positionals(program, args);
  let maybe: ForbiddenMatch = null;
  for (const rule of rules) {
    const rest = rule.words.slice(1);
    if (rest.length === 0) return { rule, certain: true };
    let certain = true;
    let possible = true;
    for (let i = 0; i < rest.length; i++) {
      const p = pos[i];
      if (p === undefined) possible = false;
      else if (p === null) certain = false;
      else if (p !== rest[i]) possible = false;
      if (!possible) break;
    }
    if (possible && certain) return { rule, certain: true };
    if (possible) maybe ??= { rule, certain: false };
    // The subcommand may hide behind options this engine does not know: a doubt, not a match.
    if (!maybe && subsequence(args, rest)) maybe = { rule, certain: false };
  }
  return maybe;
}

function subsequence(args: Word[], words: string[]): boolean {
  let j = 0;
  for (const a of args) {
    if (j < words.length && a.value === words[j]) j++;
  }
  return j === words.length;
}

function matchFree(argv: Word[], rules: Rule[]): Rule | null {
  for (const rule of rules) {
    if (rule.words.length > argv.length) continue;
    let ok = true;
    for (let i = 1; i < rule.words.length; i++) {
      if ((argv[i] as Word).value !== rule.words[i]) {
        ok = false;
        break;
      }
    }
    if (ok) return rule;
  }
  return null;
}

/** `--help` or `--version` as the last word, after nothing but plain words (`cargo test --help`). */
function asksForHelp(argv: Word[]): boolean {
  const last = argv[argv.length - 1]?.value;
  if (argv.length < 2 || (last !== '--help' && last !== '--version')) return false;
  return argv.slice(1, -1).every((w) => w.value !== null && !w.value.startsWith('-'));
}

function optionReason(shown: string, inside: string, finding: OptionFinding, what: string): string {
  return `\`${shown}\`${inside} ${what}, but \`${finding.option}\` ${finding.why}`;
}

/**
 * The decision for one simple command: forbidden first, then free, then read-only inspection, then
 * the policy's default. `roots` are the absolute paths of the working copy (for a rule's `paths`).
 */
export function judgeCommand(part: CommandPart, policy: Policy, roots: readonly string[] = []): Decision | null {
  const c = compile(policy);
  const argv = part.argv;
  const name = (argv[0] as Word).value as string;
  const program = programName(name);
  const shown = show(argv);
  const inside = part.via.length > 0 ? ` (run through \`${part.via.join('` → `')}\`)` : '';
  const help = asksForHelp(argv);

  const forbiddenRules = c.forbidden.get(program);
  if (forbiddenRules) {
    const m = matchForbidden(argv, forbiddenRules, program);
    if (part.probe && !m?.certain) return null;
    if (m?.certain && help && !part.probe) {
      const rule = `commands.forbidden[${m.rule.index}]`;
      return { effect: 'ask', rule, reason: `\`${shown}\`${inside} only asks \`${m.rule.text}\`, which the project policy forbids, for its help or version; a person decides (${rule}).` };
    }
    if (m?.certain) {
      const rule = `commands.forbidden[${m.rule.index}]`;
      return { effect: 'deny', rule, reason: `\`${m.rule.text}\` is forbidden by the project policy (${rule})${inside ? `; it was found in \`${shown}\`${inside}` : ''}.` };
    }
    if (m) {
      const rule = `commands.forbidden[${m.rule.index}]`;
      return { effect: 'ask', rule, reason: `\`${shown}\`${inside} may run \`${m.rule.text}\`, which the project policy forbids, so a person must check it (${rule}).` };
    }
  }

  if (part.probe) return null;

  // A free rule names a program as it is typed; an absolute path to it counts, a relative one
  // (`./npm`) is a project file of the same name and does not.
  const absolute = name.startsWith('/');
  const freeRules = c.free.get(name) ?? (absolute ? c.free.get(program) : undefined);
  const free = freeRules ? matchFree(argv, freeRules) : null;
  if (free) {
    const rule = `commands.free[${free.index}]`;
    const finding = free.options ? judgeOptions(argv.slice(free.words.length), free.options, roots) : null;
    if (finding) {
      return { effect: 'ask', rule, reason: `${optionReason(shown, inside, finding, `matches the free rule \`${free.text}\``)}, so it needs approval (${rule}).` };
    }
    return { effect: 'allow', rule, reason: `\`${shown}\`${inside} is free under the project policy (${rule}).` };
  }

  const known = !name.includes('/') || absolute;
  if (help && known && c.known.has(program)) {
    const rule = c.readOnly.has(program) ? `commands.readOnly[${c.readOnly.get(program)}]` : 'commands.free';
    return { effect: 'allow', rule, reason: `\`${shown}\`${inside} only prints the help or version of a program the project policy lets run (${rule}).` };
  }

  const readOnly = known ? c.readOnly.get(program) : undefined;
  let doubt = '';
  if (readOnly !== undefined) {
    const rule = `commands.readOnly[${readOnly}]`;
    const finding = readOnlyProblem(program as ReadOnlyProgram, argv.slice(1));
    if (!finding) return { effect: 'allow', rule, reason: `\`${shown}\`${inside} only reads, and the project policy lets read-only inspection run (${rule}).` };
    if (policy.commands.default === 'ask') {
      return { effect: 'ask', rule, reason: `${optionReason(shown, inside, finding, 'is a program of the read-only list')}, so it needs approval (${rule}).` };
    }
    doubt = `${optionReason(shown, inside, finding, 'is a program of the read-only list')}. `;
  }

  const rule = 'commands.default';
  switch (policy.commands.default) {
    case 'allow':
      return { effect: 'allow', rule, reason: `${doubt}No rule of the project policy names \`${shown}\`${inside}, and the policy lets such commands run (${rule}).` };
    case 'deny':
      return { effect: 'deny', rule, reason: `${doubt}No rule of the project policy names \`${shown}\`${inside}, and the policy refuses such commands (${rule}).` };
    default:
      return { effect: 'ask', rule, reason: `No rule of the project policy names \`${shown}\`${inside}, so it needs approval (${rule}).` };
  }
}

/**
 * The `commands.askEveryTime` rule naming this simple command, if any (P3). Matched by program, like
 * a forbidden rule, so `/usr/bin/git push` and `./git push` count as `git push`: this list only
 * ever makes a person look again, so it errs on the side of matching.
 */
export function askedEveryTime(part: CommandPart, policy: Policy): string | null {
  const name = part.argv[0]?.value;
  if (name === null || name === undefined) return null;
  const rules = compile(policy).askEveryTime.get(programName(name));
  if (!rules) return null;
  const m = matchFree(part.argv, rules);
  return m ? `commands.askEveryTime[${m.index}]` : null;
}
