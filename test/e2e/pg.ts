/** A query to the tests' PostgreSQL, on a connection of its own (127.0.0.1:5432, trust auth unless set otherwise). */
import pg from "pg"

export const pgAdminUrl = process.env.POSTGRES_ADMIN_URL ?? "postgres://postgres@127.0.0.1:5432/postgres"

/** The rows `text` answers on the database `url` names (the server's `postgres` database by default). */
export const pgQuery = async (text: string, url = pgAdminUrl) => {
  const client = new pg.Client({ connectionString: url })
  client.on("error", () => undefined)
  await client.connect()
  try {
    return (await client.query<Record<string, unknown>>(text)).rows
  } finally {
    await client.end().catch(() => undefined)
  }
}
