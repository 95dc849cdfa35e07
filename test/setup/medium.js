// Medium tests talk to a real database or a real Docker engine: generous, explicit per-test limits.
jest.setTimeout(180_000);
