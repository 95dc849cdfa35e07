// Module boundaries you can see (STYLE.md §1): every project is tagged scope:* and type:*,
// and the shared libs may depend only on shared libs.
import nx from '@nx/eslint-plugin';
import tseslint from 'typescript-eslint';
import prettier from 'eslint-plugin-prettier/recommended';

export default [
  { ignores: ['**/dist/**', '**/node_modules/**', '**/.build/**', 'artifacts/**', 'coverage/**', '**/*.js', '**/*.mjs', '**/*.cjs'] },
  ...tseslint.configs.recommended,
  {
    files: ['**/*.ts', '**/*.tsx'],
    plugins: { '@nx': nx },
    rules: {
      '@typescript-eslint/no-unused-vars': ['error', { argsIgnorePattern: '^_', varsIgnorePattern: '^_' }],
      '@typescript-eslint/no-explicit-any': 'error',
      '@nx/enforce-module-boundaries': [
        'error',
        {
          enforceBuildableLibDependency: false,
          // Test certificates are made by one helper shared by every project's tests (openssl, deploy/certs/make-certs.sh),
          // and so are the git servers (https and ssh) the repository tests fetch from, and the OTLP receiver traces are sent to.
          allow: ['^(\\.\\./)+test/support/certs$', '^(\\.\\./)+test/support/git-servers$', '^(\\.\\./)+test/support/otlp-receiver$'],
          depConstraints: [
            { sourceTag: 'scope:shared', onlyDependOnLibsWithTags: ['scope:shared'] },
            { sourceTag: 'scope:backend', onlyDependOnLibsWithTags: ['scope:shared', 'scope:backend'] },
            { sourceTag: 'scope:frontend', onlyDependOnLibsWithTags: ['scope:shared', 'scope:frontend'] },
            { sourceTag: 'type:lib', onlyDependOnLibsWithTags: ['type:lib'] },
          ],
        },
      ],
    },
  },
  {
    // The pure libraries import nothing from Nest, React, Docker or a database (DESIGN.md).
    files: ['libs/policy/**/*.ts', 'libs/session/**/*.ts', 'libs/contracts/**/*.ts'],
    rules: {
      'no-restricted-imports': [
        'error',
        {
          patterns: [
            { group: ['@nestjs/*', 'react', 'react-dom', 'dockerode', 'pg', 'drizzle-orm', 'drizzle-orm/*', '@electric-sql/*'], message: 'libs/* are pure: no Nest, React, Docker or database imports.' },
          ],
        },
      ],
    },
  },
  // One format everywhere (.prettierrc.json): a file Prettier would change is a lint error (`npx prettier --write FILE` fixes it).
  { ...prettier, files: ['**/*.ts', '**/*.tsx'] },
  {
    // Tests read loosely typed JSON answers from the processes they drive.
    files: ['**/*.spec.ts', '**/*.medium.ts', '**/*.e2e.ts', 'test/**/*.ts', '**/test/**/*.ts'],
    rules: { '@typescript-eslint/no-explicit-any': 'off' },
  },
];
