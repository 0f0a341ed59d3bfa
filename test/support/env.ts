/** Which database backend this test run uses: METARELAY_TEST_DB=pglite (default) or postgres. */
export const TEST_DB: 'pglite' | 'postgres' = process.env.METARELAY_TEST_DB === 'postgres' ? 'postgres' : 'pglite';

/** A maintenance connection to the test PostgreSQL server. */
export const TEST_PG_URL = process.env.METARELAY_TEST_PG_URL ?? 'postgres://postgres@127.0.0.1:5432/postgres';

export function pgUrlFor(database: string): string {
  const u = new URL(TEST_PG_URL);
  u.pathname = `/${database}`;
  return u.toString();
}
