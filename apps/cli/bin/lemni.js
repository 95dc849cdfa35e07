#!/usr/bin/env node
'use strict';
const { runTraced, processContext } = require('../dist/main.js');

runTraced(process.argv.slice(2), processContext()).then(
  (code) => {
    // Wait for stdout to drain: a JSON result piped to another program must arrive whole.
    process.exitCode = code;
  },
  (error) => {
    process.stderr.write(`${error && error.stack ? error.stack : String(error)}\n`);
    process.exitCode = 1;
  },
);
