import ora from 'ora';
import pc from 'picocolors';
import type { AgentQuestion, ApprovalAnswer, ApprovalQuestion, Prompter, QuestionAnswer, Spinner } from './prompter';

const OWN_WORDS = '\u0000own';
const DECLINE = '\u0000decline';
const STOP = '\u0000stop';

type Inquirer = typeof import('@inquirer/prompts');

function isNamed(error: unknown, name: string): boolean {
  return error instanceof Error && error.name === name;
}

/**
 * A prompt's answer, or what its closing without one means here: withdrawn by its signal
 * (`AbortPromptError`: answered elsewhere, or no longer needed) or Ctrl-C (`ExitPromptError`).
 * A meaning left out, and any other failure, is thrown on.
 */
async function unlessClosed<T, R>(ask: () => Promise<T>, meaning: { aborted?: () => R; exited?: () => R }): Promise<T | R> {
  try {
    return await ask();
  } catch (error) {
    if (isNamed(error, 'AbortPromptError') && meaning.aborted) return meaning.aborted();
    if (isNamed(error, 'ExitPromptError') && meaning.exited) return meaning.exited();
    throw error;
  }
}

/** Closing the prompt either way leaves it unanswered. */
const NOTHING = { aborted: () => null, exited: () => null };

/**
 * The terminal implementation of the prompts, on @inquirer/prompts. Ctrl-C inside an approval
 * question means "stop the session" (A3), as it does everywhere else while a session runs.
 */
export function terminalPrompter(write: (text: string) => void, stdin: NodeJS.ReadStream = process.stdin): Prompter {
  let loaded: Promise<Inquirer> | null = null;
  // Loaded on first use: scripted runs (`lemni -p`) never pay for the prompt library.
  const load = (): Promise<Inquirer> => (loaded ??= import('@inquirer/prompts'));

  // Single keys while a session runs. In raw mode Ctrl-C arrives as a byte, not as SIGINT.
  let watching: { onMention: () => void; onInterrupt: () => void } | null = null;
  let attached = false;
  let prompts = 0;
  const onData = (data: Buffer) => {
    const keys = data.toString('utf8');
    if (keys.includes('\u0003')) watching?.onInterrupt();
    else if (keys.includes('@')) watching?.onMention();
  };
  const attach = () => {
    if (attached || !watching || prompts > 0 || !stdin.isTTY) return;
    attached = true;
    stdin.setRawMode(true);
    stdin.on('data', onData);
    stdin.resume();
  };
  const detach = () => {
    if (!attached) return;
    attached = false;
    stdin.off('data', onData);
    stdin.setRawMode(false);
    stdin.pause();
  };
  // A prompt owns the keyboard while it is open; the key watch resumes after it.
  const inquirer = load;
  // One prompt at a time: a question that arrives while another closes waits for it to be gone.
  let queue: Promise<unknown> = Promise.resolve();
  const exclusive = <T>(run: () => Promise<T>): Promise<T> => {
    const next = queue.then(async () => {
      prompts += 1;
      detach();
      try {
        return await run();
      } finally {
        prompts -= 1;
        attach();
      }
    });
    queue = next.catch(() => undefined);
    return next;
  };
  return {
    watchKeys(handlers) {
      watching = handlers;
      attach();
      return () => {
        detach();
        watching = null;
      };
    },
    mention: (signal) =>
      exclusive(() =>
        unlessClosed(async () => {
          const text = await (await inquirer()).input({ message: pc.bold('@') }, { signal });
          return text.trim() === '' ? null : text;
        }, NOTHING),
      ),
    instruction: (signal) => exclusive(() => unlessClosed(async () => (await inquirer()).input({ message: pc.bold('lemni ›') }, { signal, clearPromptOnDone: false }), NOTHING)),
    approval: (question: ApprovalQuestion, signal): Promise<ApprovalAnswer | null> =>
      exclusive(async () => {
        const what = question.kind === 'command' ? 'run this command' : question.kind === 'diff' ? 'write this change' : 'keep these changes';
        write(`\n${pc.bold(pc.yellow(`${question.agent} asks to ${what}:`))}\n${question.shown}\n`);
        // One key each, typed then Enter; there is no default, so a stray Enter approves nothing.
        const choices: { key: 'y' | 'n' | 'a' | 's'; name: string; value: ApprovalAnswer }[] = [
          { key: 'y', name: 'Approve', value: 'approve' },
          { key: 'n', name: 'Reject', value: 'reject' },
        ];
        // P3: offered only when the gateway says the policy lets this command be exempted.
        if (question.offerIdentical)
          choices.push({
            key: 'a',
            name: 'Approve, and identical commands too (the same text in this session runs without asking)',
            value: 'approve_identical',
          });
        choices.push({ key: 's', name: 'Stop the session', value: 'stop' });
        return unlessClosed(
          async () =>
            (await inquirer()).expand(
              {
                message: `Approval ${question.approvalId}`,
                choices,
                expanded: true,
              },
              { signal },
            ),
          {
            aborted: () => {
              write(pc.dim('  (answered elsewhere)\n'));
              return null;
            },
            exited: () => 'stop' as const,
          },
        );
      }),
    question: (question: AgentQuestion, signal): Promise<QuestionAnswer | null> =>
      exclusive(async () => {
        write(`\n${pc.bold(pc.yellow(`${question.agent} asks:`))} ${question.question}\n${pc.dim('(Esc declines: the agent states its assumption and continues.)')}\n`);
        // Escape alone (not the start of an arrow key's sequence) declines the question.
        const escape = new AbortController();
        const onEscape = (data: Buffer) => {
          if (data.toString('utf8') === '\u001b') escape.abort();
        };
        stdin.on('data', onEscape);
        const both = AbortSignal.any([signal, escape.signal]);
        const ask = async (): Promise<QuestionAnswer> => {
          const prompts = await inquirer();
          let picked: string = OWN_WORDS;
          if (question.options.length > 0) {
            picked = await prompts.select(
              {
                message: `Question ${question.approvalId}`,
                choices: [
                  ...question.options.map((o) => ({ name: o, value: o })),
                  { name: 'Answer in my own words', value: OWN_WORDS },
                  { name: 'Decline (the agent states its assumption)', value: DECLINE },
                  { name: 'Stop the session', value: STOP },
                ],
              },
              { signal: both },
            );
          }
          if (picked === DECLINE) return 'decline';
          if (picked === STOP) return 'stop';
          if (picked !== OWN_WORDS) return { answer: picked };
          const text = await prompts.input(
            {
              message: 'Your answer',
              validate: (v) => v.trim() !== '' || 'Type an answer, or press Esc to decline.',
            },
            { signal: both },
          );
          return { answer: text.trim() };
        };
        try {
          return await unlessClosed(ask, {
            aborted: () => {
              if (escape.signal.aborted && !signal.aborted) {
                write(pc.dim('  (declined)\n'));
                return 'decline' as const;
              }
              write(pc.dim('  (answered elsewhere)\n'));
              return null;
            },
            exited: () => 'stop' as const,
          });
        } finally {
          stdin.off('data', onEscape);
        }
      }),
    extension: (description, signal) =>
      exclusive(async () => {
        write(`\n${pc.bold(pc.yellow('Limit reached.'))} ${description}\n`);
        return unlessClosed(
          async () => {
            const grant = await (await inquirer()).confirm({ message: 'Grant the extension?', default: false }, { signal });
            return grant ? 'grant' : 'decline';
          },
          { aborted: () => null, exited: () => 'decline' as const },
        );
      }),
    text: (message, options = {}) =>
      exclusive(async () => {
        if (options.secret) return (await inquirer()).password({ message, mask: '*' });
        return (await inquirer()).input({
          message,
          ...(options.default !== undefined ? { default: options.default } : {}),
        });
      }),
    confirm: (message, defaultAnswer) => exclusive(() => unlessClosed(async () => (await inquirer()).confirm({ message, default: defaultAnswer }), { exited: () => false })),
  };
}

export function terminalSpinner(stream: NodeJS.WriteStream): Spinner {
  let current: ReturnType<typeof ora> | null = null;
  return {
    start(text) {
      current?.stop();
      current = ora({ text, stream, discardStdin: false }).start();
    },
    stop() {
      current?.stop();
      current = null;
    },
  };
}
