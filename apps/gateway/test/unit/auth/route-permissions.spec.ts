import { Controller, Get, Post } from '@nestjs/common';
import { CONTROLLERS } from '../../../src/app.module';
import { listRoutes } from '../../../src/openapi/routes';
import { Can } from '../../../src/auth/permission.decorator';

/** STYLE.md §5: every gateway route declares the permission it needs; none is left open by omission. */
describe('route permissions', () => {
  const routes = listRoutes(CONTROLLERS);

  it('finds the routes of every controller', () => {
    expect(routes.length).toBeGreaterThan(25);
    expect(new Set(routes.map((r) => r.controller))).toEqual(new Set(CONTROLLERS.map((c) => c.name)));
  });

  it.each(routes.map((r) => [`${r.method} ${r.path}`, r]))('%s declares a permission', (_name, route) => {
    expect(route.permission).toBeDefined();
  });

  it('public routes are only the ones meant to be, each with a reason', () => {
    const open = routes.filter((r) => r.permission?.kind === 'public');
    expect(open.map((r) => `${r.method} ${r.path}`).sort()).toEqual([
      'GET /api/docs',
      'GET /auth/oidc',
      'GET /auth/oidc/callback',
      'GET /auth/oidc/start',
      'GET /healthz',
      'GET /metrics',
      'GET /readyz',
      'POST /auth/login',
      'POST /auth/oidc/cli',
      'POST /exec-hosts/heartbeat',
    ]);
    for (const r of open) expect(r.permission?.kind === 'public' && r.permission.why.length > 10).toBe(true);
  });

  it('notices a route without a permission', () => {
    @Controller('leaky')
    class LeakyController {
      @Get()
      @Can('read', 'Project')
      fine() {
        return 1;
      }

      @Post()
      forgotten() {
        return 2;
      }
    }
    const missing = listRoutes([LeakyController]).filter((r) => !r.permission);
    expect(missing.map((r) => `${r.method} ${r.path}`)).toEqual(['POST /leaky']);
  });
});
