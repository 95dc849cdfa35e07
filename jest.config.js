// Four tiers (STYLE.md §8): unit (pure, fast), medium (real database / real Docker),
// e2e (CLI → gateway → exec-host → container). Browser tests run under Playwright.
const { tier } = require('./jest.preset');

module.exports = {
  projects: [
    tier('unit', ['<rootDir>/{apps,libs}/*/src/**/*.spec.ts']),
    tier('medium', ['<rootDir>/{apps,libs}/*/{src,test}/**/*.medium.ts'], { testTimeout: 120_000 }),
    tier('e2e', ['<rootDir>/{apps,libs}/*/{src,test}/**/*.e2e.ts', '<rootDir>/test/e2e/**/*.e2e.ts'], { testTimeout: 300_000 }),
  ],
};
