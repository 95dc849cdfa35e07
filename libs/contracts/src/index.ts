export * from './common';
export * from './api';
