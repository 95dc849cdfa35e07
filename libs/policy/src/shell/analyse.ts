import { withSyntaxTree, type SyntaxNode } from './parser';
import { environmentProblem, isSensitiveEnv, MAX_COMMAND_LENGTH, unparseable, type ShellAnalysis, type ShellPart } from './parts';
import { normaliseWord, visitSubstitutions, type Word } from './words';
import { unwrap } from './wrappers';

export type { CommandPart, ProblemPart, ShellAnalysis, ShellPart, WritePart } from './parts';
export { MAX_COMMAND_LENGTH } from './parts';

const MAX_NESTING = 8;

function excerpt(text: string, max = 60): string {
  const oneLine = text.replace(/\s+/g, ' ').trim();
  return oneLine.length > max ? `${oneLine.slice(0, max - 1)}…` : oneLine;
}

const WRITE_OPERATORS = new Set(['>', '>>', '>|', '&>', '&>>', '>&', '<>', '&>|']);
const HARMLESS_TARGETS = new Set(['/dev/null', '/dev/stdout', '/dev/stderr', '/dev/tty']);

/** Walks a bash syntax tree and lists every command, write and doubt in it. */
export class ShellAnalyser {
  readonly parts: ShellPart[] = [];

  constructor(
    private readonly depth: number,
    private readonly via: string[],
  ) {}

  static analyse(source: string, depth = 0, via: string[] = []): ShellPart[] {
    if (source.length > MAX_COMMAND_LENGTH) {
      return [unparseable(`The command is ${source.length} characters long, more than the ${MAX_COMMAND_LENGTH} the engine analyses`)];
    }
    if (depth > MAX_NESTING) {
      return [unparseable(`The command nests shells more than ${MAX_NESTING} levels deep`)];
    }
    const analyser = new ShellAnalyser(depth, via);
    withSyntaxTree(source, (root) => analyser.visit(root));
    // An empty script of `bash -c ''` or `eval ''` is as empty as an empty command: the same answer.
    if (analyser.parts.length === 0 && source.trim().length === 0) {
      analyser.parts.push({ kind: 'problem', rule: 'shell.empty', reason: 'The command is empty, so there is nothing to allow (shell.empty).' });
    }
    return analyser.parts;
  }

  visit(node: SyntaxNode): void {
    if (node.isMissing) {
      this.parts.push(unparseable(`The command is incomplete (bash expects more after \`${excerpt(node.parent?.text ?? '')}\`)`));
      return;
    }
    switch (node.type) {
      case 'ERROR':
        this.parts.push(unparseable(`The command could not be parsed as bash near \`${excerpt(node.text)}\``));
        this.visitChildren(node);
        return;
      case 'command':
        this.command(node);
        return;
      case 'variable_assignment':
        this.assignment(node);
        return;
      case 'file_redirect':
        this.redirect(node);
        return;
      case 'function_definition': {
        // Defining a function runs nothing; its body runs whenever it is called, so judge it now.
        const body = node.childForFieldName('body');
        if (body) this.visit(body);
        return;
      }
      case 'heredoc_body':
        // The body is data, but an unquoted delimiter lets `$(…)` in it run.
        visitSubstitutions(node, (sub) => this.visit(sub));
        return;
      case 'comment':
        return;
      default:
        this.visitChildren(node);
    }
  }

  private visitChildren(node: SyntaxNode): void {
    for (const child of node.children) {
      if (!child) continue;
      if (child.isNamed || child.isMissing || child.type === 'ERROR') this.visit(child);
    }
  }

  private assignment(node: SyntaxNode): void {
    const name = node.childForFieldName('name')?.text ?? node.text.split('=')[0] ?? '';
    if (isSensitiveEnv(name)) this.parts.push(environmentProblem(name));
    visitSubstitutions(node, (sub) => this.visit(sub));
  }

  private redirect(node: SyntaxNode): void {
    const operator = node.children.find((c) => c !== null && !c.isNamed && WRITE_OPERATORS.has(c.type));
    const destination = node.childForFieldName('destination');
    if (!operator || !destination) {
      visitSubstitutions(node, (sub) => this.visit(sub));
      return;
    }
    // `>&2`, `2>&1`, `>&-`: duplicating or closing a descriptor writes no file.
    if (destination.type === 'number' || (operator.type === '>&' && destination.text === '-')) return;
    // The destination word is evaluated even for harmless targets: `> "$(curl x)"` runs curl.
    const word = normaliseWord(destination, (sub) => this.visit(sub));
    if (word.value !== null && HARMLESS_TARGETS.has(word.value)) return;
    this.parts.push({ kind: 'write', target: word.value, text: excerpt(node.text) });
  }

  private command(node: SyntaxNode): void {
    const argv: Word[] = [];
    if (/\S\\\n\S/.test(node.text)) {
      // bash joins `cu\<newline>rl` into one word; the grammar reads two words.
      this.parts.push(unparseable('A backslash-newline inside a word is read differently by bash and by this parser'));
    }
    let previousWordEnd = -1;
    let previousEnd = -1;
    let crossed = false;
    for (const child of node.namedChildren) {
      if (!child) continue;
      if (previousEnd >= 0 && !crossed) {
        // bash ends a simple command at an unescaped line break; the grammar sometimes reads on past
        // it (`a | b | c⏎time -p curl 2>/dev/null` became `c time -p curl`). What follows is a new
        // command to bash, so the parse cannot be trusted: ask.
        const gap = node.text.slice(previousEnd - node.startIndex, child.startIndex - node.startIndex);
        if (/(^|[^\\])\n/.test(gap)) {
          crossed = true;
          this.parts.push(unparseable('The parser read one command across a line break where bash ends it'));
        }
      }
      previousEnd = child.endIndex;
      switch (child.type) {
        case 'variable_assignment':
          this.assignment(child);
          break;
        case 'file_redirect':
        case 'heredoc_redirect':
        case 'herestring_redirect':
          this.visit(child);
          break;
        case 'comment':
          break;
        default:
          if (child.isMissing || child.hasError) this.visit(child);
          {
            const word = normaliseWord(child, (sub) => this.visit(sub));
            const previous = argv[argv.length - 1];
            if (previous && child.startIndex === previousWordEnd) {
              // Two words with nothing between them are one word to bash (`'c'\url` is `curl`),
              // but the grammar sometimes splits them: join them back, and ask in any case.
              this.parts.push(unparseable(`The word \`${excerpt(previous.text + word.text)}\` is split differently by bash and by this parser`));
              argv[argv.length - 1] = {
                value: previous.value === null || word.value === null ? null : previous.value + word.value,
                text: previous.text + word.text,
              };
            } else {
              argv.push(word);
            }
            previousWordEnd = child.endIndex;
          }
      }
    }
    if (argv.length > 0) this.simpleCommand(argv, this.via);
  }

  /** Judges one argv: the command itself and, through wrappers, the command it runs. */
  simpleCommand(argv: Word[], via: string[]): void {
    const first = argv[0];
    if (!first) return;
    if (first.value === '') {
      // `''` names no program: bash reports "command not found", like an empty command.
      this.parts.push({ kind: 'problem', rule: 'shell.empty', reason: 'The command names an empty program, so there is nothing to allow (shell.empty).' });
      return;
    }
    if (first.value === null) {
      this.parts.push({
        kind: 'problem',
        rule: 'shell.dynamic',
        reason: `The program name \`${excerpt(first.text)}\` is only known when the command runs, so it cannot be checked against the policy (shell.dynamic).`,
      });
      return;
    }
    const outcome = unwrap(argv);
    switch (outcome.kind) {
      case 'plain':
        this.parts.push({ kind: 'command', argv, via });
        return;
      case 'wrapper': {
        if (!outcome.transparent) this.parts.push({ kind: 'command', argv: argv.slice(0, outcome.ownArgs), via });
        for (const extra of outcome.problems) this.parts.push(extra);
        for (const inner of outcome.inner) this.simpleCommand(inner, [...via, outcome.name]);
        return;
      }
      case 'script': {
        if (!outcome.transparent) this.parts.push({ kind: 'command', argv: argv.slice(0, 1), via });
        this.parts.push(...ShellAnalyser.analyse(outcome.script, this.depth + 1, [...via, outcome.name]));
        return;
      }
      case 'unknown':
        this.parts.push({
          kind: 'problem',
          rule: 'shell.wrapper',
          reason: `\`${outcome.name}\` runs another command (${outcome.why}), which cannot be known before it runs (shell.wrapper).`,
        });
        this.parts.push({ kind: 'command', argv, via });
        // Whatever it runs, a forbidden program among its words is still refused.
        for (let i = 1; i < argv.length; i++) {
          const v = argv[i]?.value;
          if (v && !v.startsWith('-')) this.parts.push({ kind: 'command', argv: argv.slice(i), via: [...via, outcome.name], probe: true });
        }
        return;
    }
  }
}

export function analyseShell(source: string): ShellAnalysis {
  try {
    return { parts: ShellAnalyser.analyse(source) };
  } catch (error) {
    if (error instanceof Error && error.message.startsWith('The policy engine is not initialised')) throw error;
    // Pathological input (say, nesting deep enough to exhaust the stack) is a doubt, never an allow.
    return { parts: [unparseable('The command could not be analysed')] };
  }
}
