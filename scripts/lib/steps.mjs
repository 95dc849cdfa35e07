// A tiny step runner: each step says what it did or why it skipped, so a second run reads as a
// list of "already done" lines and finishes in seconds.
import pc from './colors.mjs';
import { SetupError } from './sh.mjs';

export async function step(name, fn) {
  const started = Date.now();
  process.stderr.write(`${pc.dim('•')} ${name} … `);
  try {
    const note = await fn((msg) => process.stderr.write(`\n  ${pc.dim(msg)} `));
    const secs = ((Date.now() - started) / 1000).toFixed(1);
    process.stderr.write(`${pc.green('ok')} ${pc.dim(`(${note ?? 'done'}; ${secs} s)`)}\n`);
  } catch (err) {
    process.stderr.write(`${pc.red('failed')}\n`);
    if (err instanceof SetupError) {
      process.stderr.write(`\n${pc.red('✖')} ${err.message}\n`);
      process.exit(1);
    }
    throw err;
  }
}
