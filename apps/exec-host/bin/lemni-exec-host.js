#!/usr/bin/env node
// Starts the exec-host from its build (npx tsc -b apps/exec-host first).
const { main, startupMessage } = require('../dist/main.js');

main().catch((e) => {
  console.error(startupMessage(e));
  process.exit(1);
});
