/** Nest injection tokens for the database: the opened `Database`, and its Drizzle handle. */
export const DATABASE = Symbol('DATABASE');
export const DB = Symbol('DB');
