#!/usr/bin/env node
// Starts the exec-host from its build (npm run build first).
const { main } = require('../dist/main.js');
const { StartupError, ExecHostError } = require('../dist/errors.js');

main().catch((e) => {
  console.error(e instanceof StartupError || e instanceof ExecHostError ? e.message : `The exec-host failed to start: ${e && e.message}`);
  process.exit(1);
});
