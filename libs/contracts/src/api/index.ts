export * from './common';
export * from './auth';
export * from './users';
export * from './projects';
export * from './sessions';
export * from './approvals';
export * from './events';
export * from './health';
