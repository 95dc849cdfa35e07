export * from './assert';
export * from './common';
export * from './api';
export * from './events';
export * from './environment';
export * from './exec-host';
export * from './limits';
export * from './symlinks';
