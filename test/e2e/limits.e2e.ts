import { Limits, tooLargeMessage } from '@lemniscate/contracts';
import { startStack, type Stack } from './harness';

/**
 * Size limits and links out of the working copy, end to end: the real CLI, gateway, exec-host and
 * sandbox, with the scripted model. A command over the limit is refused before anyone is asked; a
 * command that leaves a link pointing outside the working copy is refused, and the link is not in
 * the kept patch, while a link inside stays an ordinary change.
 */
let stack: Stack;

interface Event {
  type: string;
  [key: string]: any;
}

beforeAll(async () => {
  stack = await startStack();
}, 180_000);

afterAll(async () => {
  await stack?.stop();
});

async function run(name: string, turns: unknown[], answer: (e: Event) => 'approve' | 'reject' = () => 'approve') {
  const script = stack.script(name, turns);
  const child = stack.spawnCli(['--output-format', 'stream-json', '--no-apply', '--wait-for-approvals', '-p', name, '--model', `scripted:${script}`]);
  child.stdin!.end();
  const events: Event[] = [];
  const answers: Promise<unknown>[] = [];
  let buffered = '';
  child.stdout!.on('data', (d: Buffer) => {
    buffered += d.toString();
    let nl;
    while ((nl = buffered.indexOf('\n')) >= 0) {
      const line = buffered.slice(0, nl);
      buffered = buffered.slice(nl + 1);
      if (!line.trim()) continue;
      const event = JSON.parse(line) as Event;
      events.push(event);
      if (event.type === 'approval_requested') answers.push(stack.api(stack.tokens.developer, 'POST', `/approvals/${event.approvalId}/${answer(event)}`, {}));
    }
  });
  const code = await new Promise<number | null>((resolve) => child.on('close', resolve));
  await Promise.all(answers);
  const result = events.find((e) => e.type === 'result')!;
  const session = await stack.api(stack.tokens.developer, 'GET', `/sessions/${result.session_id as string}`);
  return { code, events, of: (type: string) => events.filter((e) => e.type === type), patch: (session.json.finalPatch ?? '') as string, result };
}

describe('symlinks out of the working copy (G01)', () => {
  it('`ln -s /etc/passwd leak` and `ln -s ../../.. up` are refused with a sentence and not kept; a link inside is an ordinary change', async () => {
    await stack.publishPolicy({ version: 1, commands: { free: ['ln', 'mkdir'] } });
    const r = await run('links', [
      { tool_calls: [{ name: 'Bash', arguments: { command: 'ln -s /etc/passwd leak && ln -s ../../.. up && mkdir -p sub && ln -s ../up sub/chain && ln -s src/calc.js inside' } }] },
      { text: 'Linked.' },
    ]);
    expect(r.code).toBe(0);
    const refused = r.of('decision').filter((d) => d.class === 'symlink_outside');
    expect(refused.map((d) => d.effect)).toEqual(['deny', 'deny', 'deny']);
    const reasons = refused.map((d) => d.reason as string).join('\n');
    expect(reasons).toContain('The change creates a symlink leak → /etc/passwd, which points outside the working copy; such links are refused (thirdPartyFiles.symlinksOutside).');
    expect(reasons).toContain('The change creates a symlink up → ../../.., which points outside the working copy');
    expect(reasons).toContain('sub/chain → ../up');
    expect(
      r
        .of('change_reverted')
        .flatMap((e) => e.paths as string[])
        .sort(),
    ).toEqual(['leak', 'sub/chain', 'up']);
    // Only the link inside was offered, as an ordinary change, and kept.
    const asked = r.of('approval_requested');
    expect(asked.map((e) => [e.kind, e.thirdParty])).toEqual([['changes', false]]);
    expect(r.patch).toContain('inside');
    for (const gone of ['leak', 'etc/passwd', 'b/up', 'sub/chain']) expect(r.patch).not.toContain(gone);
  }, 120_000);

  it('with thirdPartyFiles.symlinksOutside: approve, the link is offered as a flagged third-party change instead', async () => {
    await stack.publishPolicy({ version: 1, commands: { free: ['ln'] }, thirdPartyFiles: { symlinksOutside: 'approve' } });
    const r = await run('links-approve', [{ tool_calls: [{ name: 'Bash', arguments: { command: 'ln -s /etc/hostname host' } }] }, { text: 'Linked.' }], () => 'reject');
    const asked = r.of('approval_requested');
    expect(asked).toHaveLength(1);
    expect(asked[0]).toMatchObject({ kind: 'changes', thirdParty: true, thirdPartyFiles: [expect.objectContaining({ path: 'host', class: 'symlink_outside' })] });
    const approval = await stack.api(stack.tokens.developer, 'GET', `/approvals/${asked[0]!.approvalId as string}`);
    expect(approval.json.kind).toBe('third_party');
    expect(r.patch).not.toContain('host');
  }, 120_000);
});

describe('a command over the limit (Limits.commandBytes)', () => {
  it('a 1 MB command is refused before it is offered to a person, and the model is told why; one at the limit runs', async () => {
    await stack.publishPolicy({ version: 1 });
    const big = `echo ${'x'.repeat(1024 * 1024 - 5)}`;
    const atLimit = `: ${'y'.repeat(Limits.commandBytes - 11)}; echo ok`;
    expect(Buffer.byteLength(atLimit)).toBe(Limits.commandBytes);
    const r = await run('big-command', [{ tool_calls: [{ name: 'Bash', arguments: { command: big } }] }, { tool_calls: [{ name: 'Bash', arguments: { command: atLimit } }] }, { text: 'Done.' }]);
    expect(r.code).toBe(0);
    const decisions = r.of('decision');
    expect(decisions[0]).toMatchObject({ effect: 'deny', rule: 'limits.commandBytes', class: 'over_limit' });
    expect(decisions[0]!.reason).toContain(tooLargeMessage('commandBytes', 1024 * 1024));
    // The only approval is for the command at the limit, which then ran in the sandbox.
    const asked = r.of('approval_requested');
    expect(asked).toHaveLength(1);
    expect(asked[0]!.kind).toBe('command');
    expect(r.of('tool_result')).toHaveLength(1);
    expect(r.of('tool_result')[0]).toMatchObject({ exitCode: 0, stdout: 'ok\n' });
    const calls = r.result.tool_calls as { decision: string; arguments: { command: string } }[];
    expect(calls[0]!.arguments.command).not.toContain('xxxxxxxxxx');
  }, 120_000);
});
