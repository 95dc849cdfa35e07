#!/usr/bin/env node
// The gateway's command: `lemni-gateway` serves, `lemni-gateway migrate` applies migrations and exits.
'use strict';
require('../dist/main.js')
  .main(process.argv.slice(2))
  .then((code) => {
    if (code !== 0) process.exit(code);
  });
