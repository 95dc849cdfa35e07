import { SANDBOX_ENV } from '../../../src/driver/docker-options';
import { FrameReader, SANDBOX_RUNNER, encodeFrame, runnerExecOptions } from '../../../src/driver/runner';

function frame(type: string, payload: Buffer): Buffer {
  const head = Buffer.alloc(5);
  head.write(type, 0, 'latin1');
  head.writeUInt32BE(payload.length, 1);
  return Buffer.concat([head, payload]);
}

describe('runnerExecOptions', () => {
  it('starts the runner as the sandbox user in the working copy, with `bash -c` in front of each command as an engine exec has it, stdin attached', () => {
    const e = runnerExecOptions();
    expect(e.Cmd).toEqual([SANDBOX_RUNNER, '/bin/bash', '-c']);
    expect(e.User).toBe('10001:10001');
    expect(e.WorkingDir).toBe('/workspace');
    expect(e.Env).toEqual(SANDBOX_ENV);
    expect(e).toMatchObject({ AttachStdin: true, AttachStdout: true, AttachStderr: true, Tty: false, Privileged: false });
  });
});

describe('frames', () => {
  it('encodes a command as its type, its length in four big-endian bytes and its UTF-8 text', () => {
    expect(encodeFrame('C', Buffer.from('echo é'))).toEqual(Buffer.concat([Buffer.from([0x43, 0, 0, 0, 7]), Buffer.from('echo é')]));
    expect(encodeFrame('K')).toEqual(Buffer.from([0x4b, 0, 0, 0, 0]));
  });

  it('reads frames however the stream cuts them: byte by byte, several in one chunk, empty payloads', () => {
    const stream = Buffer.concat([frame('R', Buffer.from('1')), frame('O', Buffer.from('hello\n')), frame('E', Buffer.alloc(0)), frame('X', Buffer.from([0, 0, 0, 3]))]);
    const byByte = new FrameReader();
    const seen: { type: string; payload: string }[] = [];
    for (const b of stream) for (const f of byByte.push(Buffer.from([b]))) seen.push({ type: f.type, payload: f.payload.toString('hex') });
    const whole = new FrameReader().push(stream).map((f) => ({ type: f.type, payload: f.payload.toString('hex') }));
    expect(seen).toEqual(whole);
    expect(whole).toEqual([
      { type: 'R', payload: '31' },
      { type: 'O', payload: Buffer.from('hello\n').toString('hex') },
      { type: 'E', payload: '' },
      { type: 'X', payload: '00000003' },
    ]);
  });

  it('keeps a frame whose payload has not all arrived until it has', () => {
    const reader = new FrameReader();
    const f = frame('O', Buffer.alloc(70_000, 0x61));
    expect(reader.push(f.subarray(0, 40_000))).toEqual([]);
    const [done] = reader.push(f.subarray(40_000));
    expect(done?.payload.length).toBe(70_000);
  });
});
