import type { Decision } from './decision';
import type { Policy } from './schema';
import { ruleWords } from './schema';
import type { CommandPart } from './shell/parts';
import { programName } from './shell/wrappers';
import type { Word } from './shell/words';

interface Rule {
  index: number;
  words: string[];
  text: string;
}

interface CompiledCommands {
  free: Map<string, Rule[]>;
  forbidden: Map<string, Rule[]>;
  askEveryTime: Map<string, Rule[]>;
}

const compiled = new WeakMap<object, CompiledCommands>();

function group(rules: readonly string[], key: (first: string) => string): Map<string, Rule[]> {
  const map = new Map<string, Rule[]>();
  rules.forEach((text, index) => {
    const words = ruleWords(text);
    const first = words[0];
    if (first === undefined) return;
    const k = key(first);
    const list = map.get(k) ?? [];
    list.push({ index, words, text: words.join(' ') });
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
    };
    compiled.set(key, c);
  }
  return c;
}

function show(argv: Word[], max = 80): string {
  const s = argv.map((w) => w.value ?? w.text).join(' ');
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

/** The decision for one simple command: forbidden first, then free, then the policy's default. */
export function judgeCommand(part: CommandPart, policy: Policy): Decision | null {
  const c = compile(policy);
  const argv = part.argv;
  const name = (argv[0] as Word).value as string;
  const program = programName(name);
  const shown = show(argv);
  const inside = part.via.length > 0 ? ` (run through \`${part.via.join('` → `')}\`)` : '';

  const forbiddenRules = c.forbidden.get(program);
  if (forbiddenRules) {
    const m = matchForbidden(argv, forbiddenRules, program);
    if (part.probe && !m?.certain) return null;
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
  const freeRules = c.free.get(name) ?? (name.startsWith('/') ? c.free.get(program) : undefined);
  const free = freeRules ? matchFree(argv, freeRules) : null;
  if (free) {
    const rule = `commands.free[${free.index}]`;
    return { effect: 'allow', rule, reason: `\`${shown}\`${inside} is free under the project policy (${rule}).` };
  }

  const rule = 'commands.default';
  switch (policy.commands.default) {
    case 'allow':
      return { effect: 'allow', rule, reason: `No rule of the project policy names \`${shown}\`${inside}, and the policy lets such commands run (${rule}).` };
    case 'deny':
      return { effect: 'deny', rule, reason: `No rule of the project policy names \`${shown}\`${inside}, and the policy refuses such commands (${rule}).` };
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
