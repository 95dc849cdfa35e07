// Shared Jest settings: SWC compiles TypeScript (decorators and their metadata included),
// and workspace packages resolve to their sources so tests never need a prior build.
const path = require('node:path');

const swc = [
  '@swc/jest',
  {
    jsc: {
      parser: { syntax: 'typescript', decorators: true },
      transform: { legacyDecorator: true, decoratorMetadata: true },
      target: 'es2022',
    },
    module: { type: 'commonjs' },
    sourceMaps: 'inline',
  },
];

const moduleNameMapper = {
  '^@lemniscate/(contracts|policy|session|telemetry)$': path.join(__dirname, 'libs/$1/src/index.ts'),
  '^@lemniscate/(contracts|policy|session|telemetry)/(.*)$': path.join(__dirname, 'libs/$1/src/$2'),
};

function tier(displayName, testMatch, extra = {}) {
  return {
    displayName,
    rootDir: __dirname,
    testMatch,
    testPathIgnorePatterns: ['/node_modules/', '/dist/'],
    // PGlite's CommonJS build loads Node built-ins with import(), which Jest's VM refuses without
    // --experimental-vm-modules; compiling its .cjs files turns those into require().
    transform: { '^.+\\.(t|j)sx?$': swc, '^.+\\.cjs$': swc },
    // NestJS 12 and openid-client (with oauth4webapi and jose) ship ESM only, and OpenTelemetry's OTLP
    // exporter loads its transport with import(); Jest on Node 20 can neither require ESM nor run
    // import() without --experimental-vm-modules, so SWC compiles them to CommonJS too.
    transformIgnorePatterns: ['/node_modules/(?!(diff|@nestjs|@electric-sql|openid-client|oauth4webapi|jose|@opentelemetry)/)'],
    moduleNameMapper,
    testEnvironment: 'node',
    ...extra,
  };
}

module.exports = { tier, swc, moduleNameMapper };
