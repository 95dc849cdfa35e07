import { Command } from 'commander';
import type { CliContext } from '../context';
import { CliError, EXIT_OK } from '../errors';

type Done = (code: Promise<number>) => void;

interface Node {
  path: string[];
  subcommands: string[];
  options: string[];
}

/** Walks the command tree, so completion never drifts from the commands that exist. */
function commandTree(program: Command): Node[] {
  const nodes: Node[] = [];
  const visit = (cmd: Command, path: string[]) => {
    const subs = cmd.commands.filter((c) => !(c as unknown as { _hidden?: boolean })._hidden);
    const options = cmd.options.flatMap((o) => [o.long, o.short].filter((f): f is string => typeof f === 'string'));
    nodes.push({ path, subcommands: subs.map((c) => c.name()), options: [...options, '--help'] });
    for (const sub of subs) visit(sub, [...path, sub.name()]);
  };
  visit(program, []);
  return nodes;
}

function bashCompletion(program: Command): string {
  const cases = commandTree(program)
    .map((n) => `    "${n.path.join(' ')}") words="${[...n.subcommands, ...n.options].join(' ')}" ;;`)
    .join('\n');
  return `# lemni completion for bash. Install: lemni completion bash > ~/.local/share/bash-completion/completions/lemni
_lemni() {
  local cur path w i
  cur="\${COMP_WORDS[COMP_CWORD]}"
  path=""
  for ((i = 1; i < COMP_CWORD; i++)); do
    w="\${COMP_WORDS[i]}"
    case "$w" in -*) continue ;; esac
    case " $(_lemni_words "$path") " in *" $w "*) path="\${path:+$path }$w" ;; esac
  done
  COMPREPLY=($(compgen -W "$(_lemni_words "$path")" -- "$cur"))
}
_lemni_words() {
  local words=""
  case "$1" in
${cases}
  esac
  echo "$words"
}
complete -F _lemni lemni
`;
}

function zshCompletion(program: Command): string {
  const cases = commandTree(program)
    .map((n) => `    "${n.path.join(' ')}") words=(${[...n.subcommands, ...n.options].join(' ')}) ;;`)
    .join('\n');
  return `#compdef lemni
# lemni completion for zsh. Install: lemni completion zsh > "\${fpath[1]}/_lemni" (then restart zsh)
_lemni() {
  local -a words_ path_
  local w p=""
  for w in \${words[2,CURRENT-1]}; do
    [[ $w == -* ]] && continue
    _lemni_words "$p"
    (( \${words_[(Ie)$w]} )) && p="\${p:+$p }$w"
  done
  _lemni_words "$p"
  compadd -- $words_
}
_lemni_words() {
  local -a words
  case "$1" in
${cases}
  esac
  words_=($words)
}
_lemni "$@"
`;
}

export function registerCompletion(program: Command, ctx: CliContext, done: Done): void {
  program
    .command('completion <shell>')
    .description('print a completion script for bash or zsh')
    .addHelpText('after', '\nExamples:\n  $ lemni completion bash > ~/.local/share/bash-completion/completions/lemni\n  $ lemni completion zsh > "${fpath[1]}/_lemni"')
    .action((shell: string) =>
      done(
        (async () => {
          if (shell === 'bash') ctx.stdout(bashCompletion(program));
          else if (shell === 'zsh') ctx.stdout(zshCompletion(program));
          else throw new CliError(`Completion is available for bash and zsh, not "${shell}".`, 'usage');
          return EXIT_OK;
        })(),
      ),
    );
}
