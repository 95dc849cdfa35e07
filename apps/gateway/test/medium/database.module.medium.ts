import { Test } from '@nestjs/testing';
import { AuditModule } from '../../src/audit/audit.module';
import { AuditService } from '../../src/audit/audit.service';
import { IN_MEMORY, type Database } from '../../src/db/database';
import { DatabaseModule } from '../../src/db/database.module';
import { ProjectsRepository } from '../../src/db/repositories/projects.repository';
import { UsersRepository } from '../../src/db/repositories/users.repository';
import { DATABASE } from '../../src/db/tokens';
import { withTestDatabases } from '../support/db';

// Jest reads testTimeout only from the root configuration, not from a project: set it here.
jest.setTimeout(120_000);

withTestDatabases((database) => {
  it('injects the repositories and the audit service over a database the caller owns', async () => {
    const app = await Test.createTestingModule({ imports: [DatabaseModule.forDatabase(database()), AuditModule] }).compile();
    await app.init();
    const user = await app.get(UsersRepository).create({ email: 'nest@example.test', displayName: 'Nest', role: 'admin' });
    const entry = await app.get(AuditService).append({ actor: user.id, kind: 'user.create', payload: { email: user.email } });
    expect(entry).toMatchObject({ actor: user.id, kind: 'user.create', payload: { email: 'nest@example.test' } });
    await app.close();
    // Not closed by the module: the test owns it.
    await expect(database().ping()).resolves.toBeUndefined();
  });
});

it('forRoot opens and migrates at start-up and closes on shutdown', async () => {
  const app = await Test.createTestingModule({ imports: [DatabaseModule.forRoot({ dataDir: IN_MEMORY })] }).compile();
  app.enableShutdownHooks();
  await app.init();
  const database = app.get<Database>(DATABASE);
  expect(database.migrations.applied.length).toBeGreaterThan(0);
  await expect(app.get(ProjectsRepository).list()).resolves.toEqual([]);
  await app.close();
  await expect(database.ping()).rejects.toThrow();
});

it('commits the appends still queued before it closes the database it opened', async () => {
  const app = await Test.createTestingModule({ imports: [DatabaseModule.forRoot({ dataDir: IN_MEMORY }), AuditModule] }).compile();
  await app.init();
  const audit = app.get(AuditService);
  const pending = Array.from({ length: 50 }, (_, i) => audit.append({ actor: 'system', kind: 'test.shutdown', payload: { i } }));
  await app.close();
  const entries = await Promise.all(pending);
  expect(entries.map((e) => e.seq)).toEqual(Array.from({ length: 50 }, (_, i) => i + 1));
});
