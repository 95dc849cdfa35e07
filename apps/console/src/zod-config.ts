import { z } from 'zod';

// zod compiles object parsers with `new Function` when it may; the console runs under a
// Content-Security-Policy without 'unsafe-eval', so it parses without that shortcut from the start.
z.config({ jitless: true });
