import { execHostRouteOf, ExecHostRoutes, FileOperation } from '../../src/exec-host';

describe('execHostRouteOf: a control-channel path named by its route, never by its ids', () => {
  it.each([
    [ExecHostRoutes.health(), '/v1/health'],
    [ExecHostRoutes.sandboxes(), '/v1/sandboxes'],
    [ExecHostRoutes.sandbox('sbx_1'), '/v1/sandboxes/{id}'],
    [ExecHostRoutes.exec('ses_abc'), '/v1/sandboxes/{id}/exec'],
    [ExecHostRoutes.exec('a b/c'), '/v1/sandboxes/{id}/exec'],
    [ExecHostRoutes.changes('s'), '/v1/sandboxes/{id}/changes'],
    [ExecHostRoutes.acceptChanges('s'), '/v1/sandboxes/{id}/changes/accept'],
    [ExecHostRoutes.mcpProcess('s', 'p'), '/v1/sandboxes/{id}/mcp/{id}'],
    [ExecHostRoutes.mcpMessages('s', 'p'), '/v1/sandboxes/{id}/mcp/{id}/messages'],
    [ExecHostRoutes.environmentLog('job_1', 40), '/v1/environments/jobs/{id}/log'],
    [ExecHostRoutes.metrics(), '/metrics'],
  ])('%s → %s', (path, template) => {
    expect(execHostRouteOf(path)).toBe(template);
  });

  it.each(FileOperation.options)('the file operation %s', (op) => {
    expect(execHostRouteOf(ExecHostRoutes.file('s1', op))).toBe(`/v1/sandboxes/{id}/files/${op}`);
  });

  it.each(['/v1/sandboxes/a/b/exec', '/v1/sandboxes//exec', '/v1/other', '/v1/sandboxes/s/files/delete', '/v1/healthz', '/'])('%s is no route', (path) => {
    expect(execHostRouteOf(path)).toBeUndefined();
  });
});
