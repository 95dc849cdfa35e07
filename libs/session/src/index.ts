export * from './execution-config';
export * from './budget';
