export * from './audit-sinks.service';
export * from './audit-sinks.controller';
export * from './sink-config';
