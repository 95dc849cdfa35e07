import { page, type CliContext } from '../../../src/context';
import { failureExcerpt } from '../../../src/output/render';

/** A context whose terminal, pager and output are recorded. */
function context(over: Partial<CliContext> & { pagerWorks?: boolean } = {}) {
  const out: string[] = [];
  const paged: { command: string; text: string }[] = [];
  const ctx = {
    env: {},
    isTTY: true,
    rows: 10,
    stdout: (t: string) => void out.push(t),
    runPager: (command: string, text: string) => {
      paged.push({ command, text });
      return Promise.resolve(over.pagerWorks ?? true);
    },
    ...over,
  } as unknown as CliContext;
  return { ctx, out, paged };
}

const long = Array.from({ length: 30 }, (_, i) => `+line ${i}`).join('\n');

describe('page', () => {
  it('a long text at a terminal goes through $PAGER (default less -FRX)', async () => {
    const a = context();
    await page(a.ctx, long);
    expect(a.paged).toEqual([{ command: 'less -FRX', text: long }]);
    expect(a.out).toEqual([]);
    const b = context({ env: { PAGER: 'most' } });
    await page(b.ctx, long);
    expect(b.paged[0]?.command).toBe('most');
    const c = context({ env: { PAGER: 'most', LEMNISCATE_PAGER: 'bat -p' } });
    await page(c.ctx, long);
    expect(c.paged[0]?.command).toBe('bat -p');
  });

  it.each([
    ['not a terminal (a pipe, CI)', { isTTY: false }, long, true],
    ['shorter than the terminal', {}, 'a\nb\nc', true],
    ['--no-pager', {}, long, false],
    ['LEMNISCATE_PAGER set empty', { env: { LEMNISCATE_PAGER: '' } }, long, true],
    ['a pager that cannot start', { pagerWorks: false }, long, true],
  ] as const)('%s: printed straight, whole', async (_what, over, text, enabled) => {
    const x = context(over as Partial<CliContext>);
    await page(x.ctx, text, enabled);
    expect(x.out.join('')).toBe(text);
  });
});

describe('failureExcerpt', () => {
  it('shows a failing test from its name, not the run summary at the end', () => {
    const stdout = [
      'PASS src/a.test.js',
      'FAIL src/average.test.js',
      '  ● average › of [1, 2, 3] is 2',
      '    expect(received).toBe(expected)',
      '    Expected: 2',
      '    Received: 1.5',
      '',
      'Tests:       1 failed, 4 passed, 5 total',
      'Snapshots:   0 total',
      'Time:        0.4 s',
    ].join('\n');
    const shown = failureExcerpt(stdout, '');
    expect(shown.split('\n')[0]).toBe('FAIL src/average.test.js');
    expect(shown).toContain('Received: 1.5');
  });

  it('prefers what the command said on its error output', () => {
    expect(failureExcerpt('building…\ndone 3 files', 'error: cannot find module "x"\n  at main.js:1')).toBe('error: cannot find module "x"\n  at main.js:1');
  });

  it('cuts a long failure at 15 lines and says so', () => {
    const lines = ['Error: boom', ...Array.from({ length: 40 }, (_, i) => `  at frame ${i}`)];
    const shown = failureExcerpt('', lines.join('\n')).split('\n');
    expect(shown).toHaveLength(16);
    expect(shown.at(-1)).toBe('…');
  });

  it('without a line that reads like a failure, the last 10 lines', () => {
    const text = Array.from({ length: 20 }, (_, i) => `step ${i}`).join('\n');
    expect(failureExcerpt(text, '').split('\n')).toEqual(Array.from({ length: 10 }, (_, i) => `step ${i + 10}`));
  });
});
