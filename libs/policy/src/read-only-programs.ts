// The read-only catalogue's names, apart from the knowledge behind them (read-only.ts), so the
// schema (and with it the console's validator) needs nothing but this list.

/** Programs the engine knows well enough to tell when a use only reads (`commands.readOnly`). */
export const READ_ONLY_PROGRAMS = [
  // Listing and reading files
  'ls', 'cat', 'head', 'tail', 'wc', 'file', 'stat', 'du', 'df', 'tree', 'realpath', 'readlink', 'basename', 'dirname', 'pwd',
  // Searching
  'grep', 'egrep', 'fgrep', 'rg', 'ag', 'find', 'fd',
  // Comparing and transforming text to standard output
  'diff', 'cmp', 'comm', 'cut', 'tr', 'uniq', 'nl', 'fold', 'column', 'paste', 'join', 'rev', 'tac', 'od', 'hexdump', 'xxd', 'strings',
  'sort', 'sed', 'awk', 'jq', 'base64', 'md5sum', 'sha1sum', 'sha256sum', 'sha512sum', 'cksum', 'tar',
  // The shell's own and the system's state
  'echo', 'printf', 'true', 'false', 'test', 'cd', 'which', 'type', 'whoami', 'id', 'uname', 'date', 'env', 'printenv', 'seq',
  // Version control, reading only
  'git',
] as const;

export type ReadOnlyProgram = (typeof READ_ONLY_PROGRAMS)[number];
