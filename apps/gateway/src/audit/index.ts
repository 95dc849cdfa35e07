export * from './audit-chain';
export * from './audit-export';
export * from './audit.service';
export * from './audit.module';
