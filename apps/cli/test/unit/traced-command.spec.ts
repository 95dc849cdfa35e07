import { tracedCommand } from '../../src/main';

/** The CLI's span is named by its command only: an instruction, a prompt or an option's value never becomes the name. */
describe('tracedCommand', () => {
  it.each([
    [[], 'run'],
    [['-p', 'make the tests pass'], 'run'],
    [['-p', 'apply'], 'run'],
    [['--profile', 'admin', 'policy', 'publish', 'p.yaml'], 'policy'],
    [['--profile=admin', 'sessions', 'list'], 'sessions'],
    [['--token', 'lmn_secret', 'audit', 'verify'], 'audit'],
    [['--gateway', 'http://x', 'login', '--token', 't'], 'login'],
    [['apply', 'ses_1'], 'apply'],
    [['fix the approvals page'], 'run'],
    [['--', 'audit'], 'run'],
    [['--no-apply', 'approvals'], 'approvals'],
  ])('%j → lemni %s', (argv, command) => {
    expect(tracedCommand(argv as string[])).toBe(command);
  });
});
