// End-to-end tests run the whole platform as processes: each test may drive several sessions.
jest.setTimeout(300_000);
