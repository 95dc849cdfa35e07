import { describeEvent } from '../output/render';
import { textResult, type OutputFormat } from './headless';
import { ResultCollector } from './result';
import type { SessionRunApi } from './session-api';

interface FollowIo {
  stdout(text: string): void;
  stderr(text: string): void;
  onInterrupt(handler: () => void): () => void;
}

/**
 * `lemni session follow ID`: follows a session that is already running (or has ended) from its first
 * event, as the run that started it would have, and ends with the same result and exit code
 * (0 completed, 1 failed, 3 stopped by a guardrail or a person). Following changes nothing: Ctrl-C
 * stops following, not the session.
 */
export async function followExisting(api: SessionRunApi, sessionId: string, projectName: string, format: OutputFormat, io: FollowIo): Promise<number> {
  const session = await api.getSession(sessionId);
  const collector = new ResultCollector(sessionId);
  const calls = new Map<string, string>();
  const subagents = new Map<string, string>();
  const controller = new AbortController();
  const unregister = io.onInterrupt(() => controller.abort());
  if (session.status === 'running') io.stderr(`Following session ${sessionId} (Ctrl-C stops following; the session goes on).\n`);
  try {
    for await (const raw of api.follow(sessionId, { signal: controller.signal })) {
      if (format === 'stream-json') io.stdout(`${JSON.stringify(raw)}\n`);
      const event = collector.add(raw);
      if (event && format !== 'stream-json') {
        const line = describeEvent(event, calls, subagents);
        if (line !== null) io.stderr(`${line}\n`);
      }
    }
  } finally {
    unregister();
  }
  if (controller.signal.aborted) {
    io.stderr(`Stopped following; session ${sessionId} goes on (\`lemni session follow ${sessionId}\` to follow it again, \`lemni stop ${sessionId}\` to stop it).\n`);
    return 1;
  }
  const final = await api.getSession(sessionId);
  const result = collector.result(final, projectName, session.agent, session.includedUncommitted);
  if (format === 'json') io.stdout(`${JSON.stringify(result)}\n`);
  // As `lemni -p` ends stream-json: one last line, the json result marked as such.
  else if (format === 'stream-json') io.stdout(`${JSON.stringify({ type: 'result', ...result })}\n`);
  else if (format === 'text') io.stdout(textResult(result));
  return result.exit_code;
}
