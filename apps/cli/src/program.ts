import { Command } from 'commander';
import { registerPolicyCommand } from './commands/policy';

/** The `lemni` command tree; each command group registers itself from src/commands/. */
export function buildProgram(): Command {
  const program = new Command('lemni').description("Lemniscate: run coding agents under your administrator's policy").enablePositionalOptions();
  registerPolicyCommand(program);
  return program;
}
