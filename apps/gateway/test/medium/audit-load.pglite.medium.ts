import { loadTest } from '../support/audit-load';

// Jest reads testTimeout only from the root configuration, not from a project: set it here.
jest.setTimeout(120_000);

loadTest('pglite');
