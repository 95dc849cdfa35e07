export * from './execution-config';
export * from './budget';
export * from './canonical-json';
export * from './loop-detector';
export * from './untrusted';
export * from './outcome';
export * from './subagent-tracker';
