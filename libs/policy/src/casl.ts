// CASL 7 publishes its types only through the package's "exports" map, which the workspace's
// node10 module resolution does not read. Types come from the declaration directory (resolvable
// everywhere, including by consumers of this library's .d.ts); values from the package itself.
// eslint-disable-next-line @typescript-eslint/no-require-imports
const casl = require('@casl/ability') as typeof import('@casl/ability/dist/types');

export const AbilityBuilder = casl.AbilityBuilder;
export const createMongoAbility = casl.createMongoAbility;
export const caslSubject = casl.subject;
