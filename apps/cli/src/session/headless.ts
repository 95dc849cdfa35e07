import type { GatewayEvent, ProjectView, SessionMode, SessionView } from '@lemniscate/contracts';
import { CliError, EXIT_FAILURE } from '../errors';
import { applyPatch, inspectCheckout, isCheckoutOf, uncommittedPatch, type Checkout } from '../git/git';
import type { StartSessionRequest } from '../gateway/gateway-client';
import { describeEvent, stopSentence } from '../output/render';
import { count } from '../output/table';
import { ResultCollector, type HeadlessResult } from './result';
import type { DeveloperContext } from './developer-context';
import type { SessionRunApi } from './session-api';

/** What a person is asked to approve, in words (the event's `kind` is for machines). */
const APPROVAL_WORDING: Record<'diff' | 'changes' | 'extension', string> = {
  diff: 'apply a diff',
  changes: 'keep the changes a command made',
  extension: 'extend the session',
};
const APPROVAL_OBJECT: Record<'diff' | 'changes' | 'extension' | 'question', string> = {
  diff: 'a diff',
  changes: 'the changes a command made',
  extension: 'an extension of the session',
  question: 'an answer to its question',
};
export type OutputFormat = 'text' | 'json' | 'stream-json';

interface HeadlessOptions {
  instruction: string;
  project: ProjectView;
  agent?: string | undefined;
  model?: string | undefined;
  outputFormat: OutputFormat;
  /** undefined: apply when run inside a checkout of the project's repository. */
  apply?: boolean | undefined;
  includeUncommitted: boolean;
  cwd: string;
  /** Developer-side settings sent with every session (see developer-context.ts). */
  developer?: DeveloperContext;
  /** Approvals wait for a person elsewhere instead of being refused at once. */
  waitForApprovals?: boolean;
  /** L4: exit 3 when a proposed change was refused or reverted, although the session completed. */
  failOnRefusal?: boolean;
  /** After this long without an event, say on stderr that the run is still being followed. */
  quietNoticeMs?: number;
}

interface HeadlessIo {
  stdout(text: string): void;
  stderr(text: string): void;
  /** Registers what Ctrl-C does; returns a function that unregisters it. */
  onInterrupt(handler: () => void): () => void;
}

/** The mode a run is recorded with (L4): `-p` is headless, `--wait-for-approvals` keeps approvals for a person. */
function headlessMode(options: Pick<HeadlessOptions, 'waitForApprovals'>): SessionMode {
  return options.waitForApprovals ? 'headless_with_approvals' : 'headless';
}

/** Builds the session request: the base commit is sent only when the gateway can find it. */
export async function buildStartRequest(
  options: HeadlessOptions,
  checkout: Checkout | null,
  inProjectCheckout: boolean,
  io: Pick<HeadlessIo, 'stderr'>,
  mode: SessionMode,
): Promise<StartSessionRequest> {
  const request: StartSessionRequest = { ...options.developer, projectId: options.project.id, instruction: options.instruction, mode, includedUncommitted: false };
  if (options.agent) request.agent = options.agent;
  if (options.model) request.model = options.model;
  if (options.includeUncommitted) {
    if (!checkout) throw new CliError("--include-uncommitted needs to run inside a git checkout of the project's repository.", 'usage');
    if (!checkout.head) throw new CliError(`The repository at ${checkout.root} has no commit yet; commit once before using --include-uncommitted.`, 'git');
    const uncommitted = await uncommittedPatch(checkout.root);
    if (uncommitted.excluded.length > 0) io.stderr(`Not uploaded (they look like secrets): ${uncommitted.excluded.join(', ')}.\n`);
    io.stderr(
      uncommitted.files.length > 0
        ? `Including ${count(uncommitted.files.length, 'uncommitted file')} as the starting patch: ${uncommitted.files.join(', ')}.\n`
        : 'No uncommitted changes to include.\n',
    );
    request.includedUncommitted = uncommitted.patch !== '';
    if (uncommitted.patch !== '') request.startingPatch = uncommitted.patch;
  }
  if (checkout?.head && (inProjectCheckout || options.includeUncommitted)) {
    request.baseCommit = checkout.head;
    if (checkout.branch) request.branch = checkout.branch;
  }
  return request;
}

/**
 * `lemni -p`: starts a headless session, follows it live and ends with the session's exit code.
 * Nothing here ever answers an approval: a headless session is created as such and the gateway
 * refuses, and records, whatever needs a person; this side only announces it.
 */
export async function runHeadless(api: SessionRunApi, options: HeadlessOptions, io: HeadlessIo): Promise<number> {
  const checkout = await inspectCheckout(options.cwd);
  const inProjectCheckout = checkout ? await isCheckoutOf(checkout, options.project.repositorySource) : false;
  const request = await buildStartRequest(options, checkout, inProjectCheckout, io, headlessMode(options));
  const session = await api.startSession(request);
  const agent = session.agent;
  // In text and json the session_started event says it (with the agent, model and base); stream-json prints events on stdout only.
  if (options.outputFormat === 'stream-json') io.stderr(`Session ${session.id} started on project ${options.project.name}.\n`);
  const collector = new ResultCollector(session.id);
  const calls = new Map<string, string>();
  const subagents = new Map<string, string>();
  let stopping = false;
  const unregister = io.onInterrupt(() => {
    if (stopping) return;
    stopping = true;
    io.stderr('Stopping the session (rejecting unapproved writes, destroying the sandbox)…\n');
    api.stopSession(session.id, 'interrupted from the terminal').catch((error: unknown) => io.stderr(`Could not stop session ${session.id}: ${(error as Error).message}\n`));
  });
  let streamError: unknown = null;
  // A CI log that goes silent for minutes looks like a hang; say what is going on instead.
  let lastEventAt = Date.now();
  const quietMs = options.quietNoticeMs ?? 60_000;
  const quiet = setInterval(() => {
    const idle = Date.now() - lastEventAt;
    if (idle >= quietMs) io.stderr(`No event from session ${session.id} for ${Math.round(idle / 1000)} s; still following it (Ctrl-C stops it).\n`);
  }, quietMs);
  quiet.unref();
  try {
    for await (const raw of api.follow(session.id, {})) {
      lastEventAt = Date.now();
      if (options.outputFormat === 'stream-json') io.stdout(`${JSON.stringify(raw)}\n`);
      const event = collector.add(raw);
      if (event?.type === 'approval_requested' && options.waitForApprovals && event.kind === 'question') {
        io.stderr(
          `Waiting for a person: ${event.agent} asks "${event.subject}"${event.options?.length ? ` (${event.options.join(' / ')})` : ''}; answer it in the console or with \`lemni approvals approve ${event.approvalId} --answer TEXT\`, or decline it with \`lemni approvals reject ${event.approvalId}\`${waitBound(event.expiresAt)}.\n`,
        );
      } else if (event?.type === 'approval_requested' && options.waitForApprovals && event.kind !== 'question') {
        io.stderr(
          `Waiting for a person: ${event.agent} asks to ${event.kind === 'command' ? `run \`${event.subject}\`` : APPROVAL_WORDING[event.kind]}; approve or reject it in the console or with \`lemni approvals approve|reject ${event.approvalId}\`${waitBound(event.expiresAt)}.\n`,
        );
      } else if (event?.type === 'approval_requested') {
        io.stderr(
          `Refused: ${event.agent} needs a person to approve ${event.kind === 'command' ? `\`${event.subject}\`` : APPROVAL_OBJECT[event.kind]}, and nobody can approve in a headless run; the gateway records the refusal and the run goes on.\n`,
        );
      } else if (event?.type === 'approval_answered' && event.class === 'approval_refused_headless') {
        // Already said, with what was refused, when the approval was requested (just above).
      } else if (event && options.outputFormat !== 'stream-json') {
        const line = describeEvent(event, calls, subagents);
        if (line !== null) io.stderr(`${line}\n`);
      } else if (!event) {
        noteUnknown(raw, io);
      }
    }
  } catch (error) {
    streamError = error;
  } finally {
    clearInterval(quiet);
    unregister();
  }
  let final: SessionView | null = null;
  try {
    final = await api.getSession(session.id);
  } catch (error) {
    if (!collector.ending) throw streamError ?? error;
  }
  if (!collector.ending && (!final || final.status === 'running')) throw streamError ?? new CliError(`The live events of session ${session.id} ended before the session did.`, 'gateway_error');
  const result = collector.result(final, options.project.name, agent, request.includedUncommitted ?? false, options.failOnRefusal === true);
  let exitCode = result.exit_code;
  exitCode = await maybeApply(result, options, checkout, inProjectCheckout, io, exitCode);
  result.exit_code = exitCode;
  if (options.outputFormat === 'json') io.stdout(`${JSON.stringify(result)}\n`);
  // The last line of stream-json: the same object as --output-format json, marked as the result.
  else if (options.outputFormat === 'stream-json') io.stdout(`${JSON.stringify({ type: 'result', ...result })}\n`);
  else if (options.outputFormat === 'text') io.stdout(textResult(result));
  return exitCode;
}

/** The end of a wait, in the words of the waiting message (L1: it is bounded by the project policy). */
function waitBound(expiresAt: string | undefined): string {
  if (!expiresAt) return '';
  return `; it expires unanswered at ${expiresAt} (the project policy's approvals.timeoutSeconds, within the session's duration limit), and the session then stops at its time limit`;
}

function noteUnknown(raw: GatewayEvent, io: Pick<HeadlessIo, 'stderr'>): void {
  if (raw.type === 'approval_requested') io.stderr('Refused: an approval was requested, and nobody can approve in a headless run.\n');
}

async function maybeApply(result: HeadlessResult, options: HeadlessOptions, checkout: Checkout | null, inProjectCheckout: boolean, io: Pick<HeadlessIo, 'stderr'>, exitCode: number): Promise<number> {
  if (result.patch.trim() === '' || options.apply === false) return exitCode;
  if (!checkout) {
    if (options.apply === true) {
      result.applied = { applied: false, files: [], conflicts: [], message: 'Not inside a git checkout; nothing was applied.' };
      io.stderr(`--apply: not inside a git checkout, so the patch was not applied; \`lemni apply ${result.session_id}\` applies it later.\n`);
      result.classes.push('apply_conflict');
      return EXIT_FAILURE;
    }
    return exitCode;
  }
  const mine = inProjectCheckout || (await isCheckoutOf(checkout, options.project.repositorySource, result.base_commit));
  if (options.apply === undefined && !mine) {
    io.stderr(`The approved patch was not applied: ${checkout.root} is not a checkout of ${options.project.name}'s repository (\`lemni apply ${result.session_id}\` in one applies it).\n`);
    return exitCode;
  }
  if (result.status !== 'completed') {
    io.stderr(`The session did not complete, so its approved patch was not applied; \`lemni apply ${result.session_id}\` applies it if you want it.\n`);
    return exitCode;
  }
  const outcome = await applyPatch(checkout.root, result.patch);
  if (outcome.applied) {
    result.applied = { applied: true, files: outcome.files, conflicts: [], message: null };
    io.stderr(`Applied the approved patch to ${checkout.root} (${count(outcome.files.length, 'file')}); review it and commit under your name.\n`);
    return exitCode;
  }
  result.applied = { applied: false, files: outcome.files, conflicts: outcome.conflicts, message: outcome.message };
  result.classes.push('apply_conflict');
  io.stderr(`${outcome.message} The patch is in the session: \`lemni apply ${result.session_id}\` after resolving.\n`);
  return EXIT_FAILURE;
}

/** X2: a failed run says whose failure it was — the platform's, the sandbox's or the model's — never the command's. */
function failureSentence(classes: readonly string[]): string {
  if (classes.includes('platform_error')) return 'The session failed: the platform (the exec-host or the container engine) failed, not the command; the patch so far is kept.';
  if (classes.includes('sandbox_lost')) return 'The session failed: its sandbox was lost; the patch so far is kept.';
  if (classes.includes('model_timeout')) return 'The session failed: the model did not answer in time.';
  if (classes.includes('model_error')) return 'The session failed: the model could not be reached or answered with an error.';
  return 'The session failed.';
}

export function textResult(result: HeadlessResult): string {
  const lines: string[] = [];
  if (result.status === 'stopped') lines.push(`Stopped: ${stopSentence(result.stop_reason)}`);
  if (result.status === 'failed') lines.push(failureSentence(result.classes));
  if (result.exit_code === 3 && result.status === 'completed')
    lines.push(`Exit 3 (--fail-on-refusal): ${count(result.refused_changes.length, 'proposed change')} refused, ${result.reverted_changes.length} reverted.`);
  if (result.summary) lines.push(result.summary);
  if (lines.length === 0) lines.push('Done.');
  return `${lines.join('\n')}\n`;
}
