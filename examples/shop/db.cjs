// The shop's database tool: `node db.cjs migrate` applies migrations/*.sql in name order (each once, recorded in
// schema_migrations), `node db.cjs seed` runs seeds/*.sql. berth runs both with DB_URL pointing at the slice being
// filled: the golden template once, or a world's own database when it cannot be a copy of the golden.
const { readdirSync, readFileSync } = require("node:fs")
const { join } = require("node:path")
const { Client } = require("pg")

const sqlFiles = (folder) =>
  readdirSync(join(__dirname, folder))
    .filter((f) => f.endsWith(".sql"))
    .sort()
    .map((f) => ({ name: f, sql: readFileSync(join(__dirname, folder, f), "utf8") }))

const inTransaction = async (client, f) => {
  await client.query("BEGIN")
  try {
    await f()
    await client.query("COMMIT")
  } catch (e) {
    await client.query("ROLLBACK")
    throw e
  }
}

const migrate = async (client) => {
  await client.query("CREATE TABLE IF NOT EXISTS schema_migrations (name text PRIMARY KEY)")
  const done = new Set((await client.query("SELECT name FROM schema_migrations")).rows.map((r) => r.name))
  for (const { name, sql } of sqlFiles("migrations")) {
    if (done.has(name)) continue
    await inTransaction(client, async () => {
      await client.query(sql)
      await client.query("INSERT INTO schema_migrations (name) VALUES ($1)", [name])
    })
    console.log(`migrated ${name}`)
  }
}

const seed = async (client) => {
  for (const { name, sql } of sqlFiles("seeds")) {
    await inTransaction(client, () => client.query(sql))
    console.log(`seeded ${name}`)
  }
}

const main = async () => {
  const command = process.argv[2]
  const run = { migrate, seed }[command]
  if (run === undefined) throw new Error("usage: node db.cjs migrate|seed")
  if (!process.env.DB_URL) throw new Error("DB_URL is not set: berth sets it when it runs migrate and seed")
  const client = new Client({ connectionString: process.env.DB_URL })
  await client.connect()
  try {
    await run(client)
  } finally {
    await client.end()
  }
}

main().catch((e) => {
  // the message only: a connection error's details could carry the URL
  console.error(`db.cjs: ${e.message}`)
  process.exit(1)
})
