// ANSI colours without a dependency (these scripts run before `npm ci`); off when not a TTY or NO_COLOR.
const on = process.stderr.isTTY && !process.env.NO_COLOR;
const wrap = (a, b) => (s) => (on ? `\x1b[${a}m${s}\x1b[${b}m` : String(s));
export default { green: wrap(32, 39), red: wrap(31, 39), dim: wrap(2, 22), bold: wrap(1, 22), yellow: wrap(33, 39), cyan: wrap(36, 39) };
