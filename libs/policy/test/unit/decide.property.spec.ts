import fc from 'fast-check';
import { decide } from '../../src/decide';
import { EFFECTS, parsePolicy, recommendedPolicy, type Policy } from '../../src/schema';
import { initPolicyEngine } from '../../src/shell/parser';

beforeAll(async () => {
  await initPolicyEngine();
});

const bash = (command: string, policy: Policy = recommendedPolicy) => decide({ name: 'Bash', arguments: { command } }, policy);

// A policy that lets unnamed commands run: only the forbidden list stands between a disguised
// command and execution, so a bypass would show up as `allow`.
const permissive = parsePolicy({ version: 1, commands: { default: 'allow', free: ['npm test', 'pytest', 'go test'] } });

const safeArg = fc.stringMatching(/^[a-z0-9][a-z0-9_.-]{0,8}$/);
const freeCommand = fc
  .tuple(fc.constantFrom('npm test', 'npm run lint', 'pytest', 'go test ./...', 'cargo test', 'npx tsc --noEmit', 'make test'), fc.array(safeArg, { maxLength: 2 }))
  .map(([cmd, args]) => [cmd, ...args].join(' '));
const forbiddenCommand = fc
  .tuple(fc.constantFrom('curl', 'wget', 'ssh', 'scp', 'nc', 'socat', 'git push', 'npm publish'), fc.array(safeArg, { maxLength: 2 }))
  .map(([cmd, args]) => [cmd, ...args].join(' '));

/** Ways to hide a command inside a larger one; each still runs it. */
const hide: ((inner: string) => string)[] = [
  (c) => c,
  (c) => `(${c})`,
  (c) => `{ ${c}; }`,
  (c) => `echo $(${c})`,
  (c) => `echo "$(${c})"`,
  (c) => `echo \`${c}\``,
  (c) => `cat <(${c})`,
  (c) => `npm test > >(${c})`,
  (c) => `sh -c '${c}'`,
  (c) => `bash -c "${c}"`,
  (c) => `timeout 5 ${c}`,
  (c) => `env CI=1 ${c}`,
  (c) => `nice -n 5 ${c}`,
  (c) => `sudo ${c}`,
  (c) => `echo x | xargs ${c}`,
  (c) => `if true; then ${c}; fi`,
  (c) => `for i in 1; do ${c}; done`,
  (c) => `f() { ${c}; }`,
  (c) => `eval "${c}"`,
  (c) => `X=$(${c}) npm test`,
  (c) => `cat <<EOF\n$(${c})\nEOF`,
  (c) => `${c} &`,
  (c) => `! ${c}`,
  (c) => `trap '${c}' EXIT`,
  (c) => `alias ll='${c}'`,
  (c) => `cat <<EOF && ${c}\nx\nEOF`,
  (c) => `find . -exec ${c} {} \\;`,
  (c) => `time -p ${c} 2>/dev/null`,
];
const OPERATORS = [' ; ', ' && ', ' || ', ' | ', ' & ', '\n'];

describe('decide: properties', () => {
  it('a forbidden command hidden anywhere in a composition of free commands is never allowed', () => {
    fc.assert(
      fc.property(
        fc.array(freeCommand, { minLength: 0, maxLength: 4 }),
        forbiddenCommand,
        fc.nat(),
        fc.integer({ min: 0, max: hide.length - 1 }),
        fc.array(fc.integer({ min: 0, max: OPERATORS.length - 1 }), { minLength: 5, maxLength: 5 }),
        (free, forbidden, position, how, ops) => {
          const parts = [...free];
          parts.splice(position % (parts.length + 1), 0, (hide[how] as (c: string) => string)(forbidden));
          const command = parts.map((p, i) => (i === 0 ? p : `${OPERATORS[(ops[i % ops.length] ?? 0) % OPERATORS.length]}${p}`)).join('');
          for (const policy of [recommendedPolicy, permissive]) {
            const d = bash(command, policy);
            if (d.effect === 'allow') throw new Error(`allowed: ${JSON.stringify(command)} → ${d.rule}: ${d.reason}`);
          }
        },
      ),
      { numRuns: 1500 },
    );
  });

  /** Spellings bash reads as the same characters. */
  const spell: ((ch: string) => string)[] = [
    (ch) => ch,
    (ch) => `\\${ch}`,
    (ch) => `'${ch}'`,
    (ch) => `"${ch}"`,
    (ch) => `$'\\x${ch.charCodeAt(0).toString(16)}'`,
    (ch) => `$'\\${ch.charCodeAt(0).toString(8)}'`,
    (ch) => `${ch}''`,
    (ch) => `""${ch}`,
  ];

  it('a forbidden program stays forbidden under any quoting and escaping', () => {
    fc.assert(
      fc.property(
        fc.constantFrom('curl', 'wget', 'ssh', 'nc', 'socat', 'scp'),
        fc.array(fc.integer({ min: 0, max: spell.length - 1 }), { minLength: 8, maxLength: 8 }),
        fc.constantFrom('', '/usr/bin/', '/bin/', '~/bin/'),
        fc.array(safeArg, { maxLength: 2 }),
        (program, choices, prefix, args) => {
          const disguised = [...program].map((ch, i) => (spell[choices[i % choices.length] ?? 0] as (c: string) => string)(ch)).join('');
          const command = [`${prefix}${disguised}`, ...args].join(' ');
          for (const policy of [recommendedPolicy, permissive]) {
            const d = bash(command, policy);
            if (d.effect !== 'deny') throw new Error(`not denied: ${JSON.stringify(command)} → ${d.effect} ${d.rule}: ${d.reason}`);
          }
        },
      ),
      { numRuns: 1500 },
    );
  });

  /** Spellings of one word that bash reads the same: quoted, escaped, ANSI-C. */
  const spellWord = (word: string, choices: number[]) => [...word].map((ch, i) => (spell[choices[i % choices.length] ?? 0] as (c: string) => string)(ch)).join('');
  const readOnlyArgs = fc.array(fc.constantFrom('.', 'src', '-name', '"*.ts"', '-type', 'f', '-maxdepth', '2', '-print', '-newer', 'x'), { maxLength: 4 });

  it('a find with an action that runs or writes, anywhere and however spelled, is never allowed', () => {
    fc.assert(
      fc.property(
        readOnlyArgs,
        readOnlyArgs,
        fc.constantFrom('-exec', '-execdir', '-ok', '-okdir', '-delete', '-fprint', '-fprint0', '-fprintf', '-fls'),
        fc.array(fc.integer({ min: 0, max: spell.length - 1 }), { minLength: 8, maxLength: 8 }),
        fc.integer({ min: 0, max: 4 }),
        (before, after, action, choices, how) => {
          const inner = `find ${[...before, spellWord(action, choices), 'id', '{}', '\\;', ...after].join(' ')}`;
          const command = [(c: string) => c, (c: string) => `timeout 5 ${c}`, (c: string) => `env ${c}`, (c: string) => `nice ${c}`, (c: string) => `sh -c '${c.replace(/'/g, '')}'`][how]!(inner);
          const d = bash(command);
          if (d.effect === 'allow') throw new Error(`allowed: ${JSON.stringify(command)} → ${d.rule}: ${d.reason}`);
        },
      ),
      { numRuns: 800 },
    );
  });

  it('an option that runs a program, in a free or read-only command, is never allowed however it is written', () => {
    const cases: [string, string, string][] = [
      ['go test ./...', '-exec', 'sh'],
      ['go build', '-toolexec', 'x'],
      ['npm test', '--script-shell', 'x'],
      ['cargo test', '--config', 'target.x.runner=x'],
      ['jest', '--config', '/tmp/x.js'],
      ['pytest', '-p', 'evil'],
      ['make test', '-f', '/tmp/x.mk'],
      ['rg foo', '--pre', 'sh'],
      ['sort f', '--compress-program', 'sh'],
      ['tar -tf x.tar', '--to-command', 'sh'],
      ['git log', '--output', '/x'],
      ['git diff', '--ext-diff', ''],
      ['git grep foo', '--open-files-in-pager', 'sh'],
      ['sed -n p', '--in-place', ''],
    ];
    fc.assert(
      fc.property(
        fc.integer({ min: 0, max: cases.length - 1 }),
        fc.array(fc.integer({ min: 0, max: spell.length - 1 }), { minLength: 8, maxLength: 8 }),
        fc.constantFrom('=', ' '),
        fc.boolean(),
        (which, choices, joiner, abbreviate) => {
          const [base, option, value] = cases[which]!;
          const name = abbreviate && option.startsWith('--') && option.length > 6 ? option.slice(0, -1) : option;
          const spelled = spellWord(name, choices);
          const command = value === '' ? `${base} ${spelled}` : joiner === '=' ? `${base} ${spelled}=${value}` : `${base} ${spelled} ${value}`;
          const d = bash(command);
          if (d.effect === 'allow') throw new Error(`allowed: ${JSON.stringify(command)} → ${d.rule}: ${d.reason}`);
        },
      ),
      { numRuns: 1500 },
    );
  });

  it('under xargs, whose input adds words nobody has seen, a reader that has a program-running option and any -I command are never allowed', () => {
    const readers = ['rg foo', 'find .', 'git log', 'git diff', 'sed -n p', 'awk', 'sort', 'tar -tf x.tar', 'fd', 'npm test', 'go test ./...', 'make test', 'pytest', 'env', 'sh -c', 'bash'];
    const xargsOptions = fc.array(fc.constantFrom('-0', '-r', '-n 1', '-n1', '-P 2', '-d x', '-a list', '--max-args=2', '-t', '-x'), { maxLength: 3 });
    fc.assert(
      fc.property(fc.constantFrom(...readers), xargsOptions, fc.constantFrom('', 'find . -type f | ', 'printf -- "--pre=sh\\n" | ', 'git ls-files | '), (reader, options, input) => {
        const command = `${input}xargs ${options.join(' ')} ${reader}`.replace(/ +/g, ' ');
        const d = bash(command);
        if (d.effect === 'allow') throw new Error(`allowed: ${JSON.stringify(command)} → ${d.rule}: ${d.reason}`);
      }),
      { numRuns: 600 },
    );
    fc.assert(
      fc.property(
        fc.constantFrom('-I{}', '-I {}', '-i', '-0I{}', '-rI{}', '--replace', '--replace={}', '-d i -I{}'),
        xargsOptions,
        fc.constantFrom('sh -c {}', 'cat {}', 'grep x {}', 'bash -c "{}"', 'echo {}'),
        (replace, options, command) => {
          const line = `xargs ${options.join(' ')} ${replace} ${command}`.replace(/ +/g, ' ');
          const d = bash(line);
          if (d.effect === 'allow') throw new Error(`allowed: ${JSON.stringify(line)} → ${d.rule}: ${d.reason}`);
        },
      ),
      { numRuns: 400 },
    );
  });

  it('a sed or awk script that writes or runs a command is never allowed, whatever surrounds it', () => {
    const sedBad = ['s/a/b/e', 's/a/b/w out', 'w out', '1e id', 'W out', 's|a|b|ge', '/x/w out', '$!e id'];
    const awkBad = ['BEGIN{system("id")}', '{print | "sh"}', '{print > "out"}', '{"id" | getline x}', '{printf "x" >> "out"}', '{print $1 |& "sh"}'];
    const harmless = fc.constantFrom('', 'p;', '1d;', '/x/p;', 's/q/r/g;');
    fc.assert(
      fc.property(fc.constantFrom(...sedBad), harmless, harmless, fc.constantFrom('', '-n ', '-E ', '-s '), (bad, pre, post, flags) => {
        for (const command of [`sed ${flags}'${pre}${bad}'`, `sed ${flags}-e '${pre}' -e '${bad}${post ? `;${post}` : ''}'`]) {
          const d = bash(command);
          if (d.effect === 'allow') throw new Error(`allowed: ${JSON.stringify(command)} → ${d.rule}: ${d.reason}`);
        }
      }),
      { numRuns: 400 },
    );
    fc.assert(
      fc.property(fc.constantFrom(...awkBad), fc.constantFrom('', 'NR==1 ', '/x/ '), fc.constantFrom('', '-F: ', '-v n=1 '), (bad, pattern, flags) => {
        const command = `awk ${flags}'${pattern}${bad}' file`;
        const d = bash(command);
        if (d.effect === 'allow') throw new Error(`allowed: ${JSON.stringify(command)} → ${d.rule}: ${d.reason}`);
      }),
      { numRuns: 300 },
    );
  });

  it('never throws on arbitrary strings, and always explains itself', () => {
    const shellish = fc
      .array(fc.constantFrom('curl', 'npm test', ' ', ';', '&&', '|', '(', ')', '$(', '`', '"', "'", '\\', '<<', 'EOF', '\n', '>', '{', '}', '$', '*', 'sh -c', '#', '\0', 'é', '\u2028'), {
        maxLength: 40,
      })
      .map((a) => a.join(''));
    fc.assert(
      fc.property(fc.oneof(fc.string({ unit: 'binary', maxLength: 300 }), shellish), (command) => {
        const d = bash(command);
        expect(EFFECTS).toContain(d.effect);
        expect(d.rule.length).toBeGreaterThan(0);
        expect(d.reason.length).toBeGreaterThan(0);
      }),
      { numRuns: 3000 },
    );
  });

  it('never throws on arbitrary tool calls', () => {
    fc.assert(
      fc.property(fc.string(), fc.anything(), (name, args) => {
        const d = decide({ name, arguments: args as Record<string, unknown> }, recommendedPolicy);
        expect(EFFECTS).toContain(d.effect);
      }),
      { numRuns: 1000 },
    );
  });

  it('survives pathological nesting without allowing it', () => {
    const deep = `${'$('.repeat(3000)}curl x${')'.repeat(3000)}`;
    expect(bash(deep).effect).not.toBe('allow');
    const deepShells = `${"sh -c '".repeat(12)}npm test`;
    expect(bash(deepShells).effect).not.toBe('allow');
    expect(bash(`npm test ${'x'.repeat(70_000)}`).rule).toBe('shell.unparseable');
  });
});
