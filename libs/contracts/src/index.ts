export * from './common';
export * from './api';
export * from './events';
