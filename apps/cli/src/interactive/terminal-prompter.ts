import ora from 'ora';
import pc from 'picocolors';
import type { ApprovalAnswer, ApprovalQuestion, Prompter, Spinner } from './prompter';

type Inquirer = typeof import('@inquirer/prompts');

function isNamed(error: unknown, name: string): boolean {
  return error instanceof Error && error.name === name;
}

/**
 * The terminal implementation of the prompts, on @inquirer/prompts. Ctrl-C inside an approval
 * question means "stop the session" (A3), as it does everywhere else while a session runs.
 */
export function terminalPrompter(write: (text: string) => void): Prompter {
  let loaded: Promise<Inquirer> | null = null;
  // Loaded on first use: scripted runs (`lemni -p`) never pay for the prompt library.
  const inquirer = (): Promise<Inquirer> => (loaded ??= import('@inquirer/prompts'));
  return {
    async instruction(signal) {
      try {
        return await (await inquirer()).input({ message: pc.bold('lemni ›') }, { signal, clearPromptOnDone: false });
      } catch (error) {
        if (isNamed(error, 'AbortPromptError') || isNamed(error, 'ExitPromptError')) return null;
        throw error;
      }
    },
    async approval(question: ApprovalQuestion, signal): Promise<ApprovalAnswer | null> {
      const what = question.kind === 'command' ? 'run this command' : question.kind === 'diff' ? 'write this change' : 'keep these changes';
      write(`\n${pc.bold(pc.yellow(`${question.agent} asks to ${what}:`))}\n${question.shown}\n`);
      const choices: { name: string; value: ApprovalAnswer }[] = [
        { name: 'Approve', value: 'approve' },
        { name: 'Reject', value: 'reject' },
      ];
      if (question.offerIdentical) choices.push({ name: 'Approve, and identical commands for the rest of this session', value: 'approve_identical' });
      choices.push({ name: 'Stop the session', value: 'stop' });
      try {
        return await (await inquirer()).select({ message: `Approval ${question.approvalId}`, choices }, { signal });
      } catch (error) {
        if (isNamed(error, 'AbortPromptError')) {
          write(pc.dim('  (answered elsewhere)\n'));
          return null;
        }
        if (isNamed(error, 'ExitPromptError')) return 'stop';
        throw error;
      }
    },
    async extension(description, signal) {
      write(`\n${pc.bold(pc.yellow('Limit reached.'))} ${description}\n`);
      try {
        const grant = await (await inquirer()).confirm({ message: 'Grant the extension?', default: false }, { signal });
        return grant ? 'grant' : 'decline';
      } catch (error) {
        if (isNamed(error, 'AbortPromptError')) return null;
        if (isNamed(error, 'ExitPromptError')) return 'decline';
        throw error;
      }
    },
    async text(message, options = {}) {
      if (options.secret) return (await inquirer()).password({ message, mask: '*' });
      return (await inquirer()).input({ message, ...(options.default !== undefined ? { default: options.default } : {}) });
    },
    async confirm(message, defaultAnswer) {
      try {
        return await (await inquirer()).confirm({ message, default: defaultAnswer });
      } catch (error) {
        if (isNamed(error, 'ExitPromptError')) return false;
        throw error;
      }
    },
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
