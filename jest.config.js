// Tiers (STYLE.md §8): unit (pure, fast), medium (real database / real Docker),
// e2e (CLI → gateway → exec-host → container), faults (the same stack under failures). Browser tests run under Playwright.
const { tier } = require('./jest.preset');

module.exports = {
  projects: [
    tier('unit', ['<rootDir>/{apps,libs}/*/test/unit/**/*.spec.ts', '<rootDir>/test/unit/**/*.spec.ts'], { setupFilesAfterEnv: ['<rootDir>/test/setup/unit.js'] }),
    // testTimeout is a global option that projects ignore; each tier sets its own in a setup file.
    tier('medium', ['<rootDir>/{apps,libs}/*/test/**/*.medium.ts', '<rootDir>/test/medium/**/*.medium.ts'], { setupFilesAfterEnv: ['<rootDir>/test/setup/medium.js'] }),
    tier('e2e', ['<rootDir>/{apps,libs}/*/test/**/*.e2e.ts', '<rootDir>/test/e2e/**/*.e2e.ts'], { setupFilesAfterEnv: ['<rootDir>/test/setup/e2e.js'] }),
    // Faults: the real stack with processes killed, the engine or the database taken away mid-session.
    tier('faults', ['<rootDir>/test/faults/**/*.faults.ts'], { setupFilesAfterEnv: ['<rootDir>/test/setup/e2e.js'] }),
  ],
};
