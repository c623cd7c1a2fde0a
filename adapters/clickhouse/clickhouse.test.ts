import { afterAll, describe, expect, it } from "@effect/vitest"
import * as Effect from "effect/Effect"
import { runNames, runOwner, sliceMaker } from "../testing.js"
import { clickhouseAdapter } from "./index.js"

/** A real server's HTTP interface: `CLICKHOUSE_ADMIN_URL`, or the local one. */
const adminUrl = process.env.CLICKHOUSE_ADMIN_URL ?? "http://default@127.0.0.1:8123"
const { prefix, fresh } = runNames()
const owner = runOwner()
const sliceOf = sliceMaker({ adapter: "clickhouse", service: "olap", owner, adminUrl })

const run = async (sql: string, database?: string): Promise<string> => {
  const url = new URL(adminUrl)
  const auth = Buffer.from(`${decodeURIComponent(url.username)}:${decodeURIComponent(url.password)}`).toString("base64")
  const response = await fetch(
    `${url.protocol}//${url.host}/${database === undefined ? "" : `?database=${database}`}`,
    {
      method: "POST",
      body: sql,
      headers: { authorization: `Basic ${auth}` }
    }
  )
  const text = await response.text()
  if (!response.ok) throw new Error(text)
  return text
}
const sql = (text: string, database?: string): Effect.Effect<string> => Effect.promise(() => run(text, database))

afterAll(async () => {
  for (const name of (await run("SELECT name FROM system.databases")).split("\n")) {
    if (name.startsWith(prefix)) await run(`DROP DATABASE IF EXISTS \`${name}\``)
  }
  for (const name of (await run("SELECT name FROM system.tables WHERE database = 'berth_meta'")).split("\n")) {
    if (name.startsWith(prefix)) await run(`DROP TABLE IF EXISTS berth_meta.\`${name}\``)
  }
})

describe("clickhouseAdapter", () => {
  it.live("resolves to the admin URL with the database as the HTTP interface's parameter", () =>
    Effect.gen(function* () {
      expect(yield* clickhouseAdapter.resolve(sliceOf("acme_db", { adminUrl: "http://app:s3cret@olap:8123" }))).toBe(
        "http://app:s3cret@olap:8123/?database=acme_db"
      )
      expect(yield* clickhouseAdapter.resolve(sliceOf("acme_db", { adminUrl: undefined }))).toBe(
        "http://default@127.0.0.1:8123/?database=acme_db"
      )
    })
  )

  it.live("marks a slice in berth_meta with its owner, in the table's DDL", () =>
    Effect.gen(function* () {
      const name = fresh("marked")
      yield* clickhouseAdapter.provision(sliceOf(name))
      const mark = yield* sql(
        `SELECT default_expression FROM system.columns WHERE database = 'berth_meta' AND table = '${name}' AND name = 'owner' FORMAT TabSeparatedRaw`
      )
      expect(mark.trim()).toBe(`'${owner}'`)
      yield* clickhouseAdapter.teardown(sliceOf(name))
      expect((yield* sql(`EXISTS TABLE berth_meta.\`${name}\``)).trim()).toBe("0")
    })
  )

  it.live("a provision cut off after its mark: listed, finished by provision, dropped by teardown", () =>
    Effect.gen(function* () {
      const name = fresh("half")
      yield* sql("CREATE DATABASE IF NOT EXISTS berth_meta")
      yield* sql(`CREATE TABLE berth_meta.\`${name}\` (owner String DEFAULT '${owner}') ENGINE = Log`)
      expect(yield* clickhouseAdapter.list(sliceOf(name))).toContain(name)
      expect(yield* clickhouseAdapter.provision(sliceOf(name))).toBe(true)
      expect((yield* sql(`SELECT count() FROM system.databases WHERE name = '${name}'`)).trim()).toBe("1")
      yield* clickhouseAdapter.teardown(sliceOf(name))
      expect(yield* clickhouseAdapter.list(sliceOf(name))).not.toContain(name)
    })
  )

  it.live("clones tables with their engines and keys, their rows, and views on them", () =>
    Effect.gen(function* () {
      const golden = fresh("golden")
      const copy = fresh("copy")
      yield* clickhouseAdapter.provision(sliceOf(golden))
      yield* clickhouseAdapter.provision(sliceOf(copy))
      yield* sql(
        "CREATE TABLE events (day Date, id UInt64, kind String) ENGINE = MergeTree() PARTITION BY toYYYYMM(day) ORDER BY (day, id)",
        golden
      )
      yield* sql("INSERT INTO events VALUES ('2026-01-01', 1, 'a'), ('2026-02-01', 2, 'b')", golden)
      yield* sql(`CREATE VIEW kinds AS SELECT kind FROM \`${golden}\`.events`, golden)
      yield* clickhouseAdapter.clone(sliceOf(golden), sliceOf(copy))
      expect(yield* sql("SELECT id, kind FROM events ORDER BY id FORMAT CSV", copy)).toBe('1,"a"\n2,"b"\n')
      expect(
        yield* sql("SELECT engine FROM system.tables WHERE database = currentDatabase() ORDER BY name", copy)
      ).toBe("MergeTree\nView\n")
      // the view reads the copy, not the golden
      yield* sql("INSERT INTO events VALUES ('2026-03-01', 3, 'c')", golden)
      expect(yield* sql("SELECT count() FROM kinds", copy)).toBe("2\n")
    })
  )

  it.live("refuses to clone materialized views, leaving the target empty and owned", () =>
    Effect.gen(function* () {
      const golden = fresh("mv")
      const copy = fresh("mv_copy")
      yield* clickhouseAdapter.provision(sliceOf(golden))
      yield* clickhouseAdapter.provision(sliceOf(copy))
      yield* sql("CREATE TABLE raw (x UInt8) ENGINE = Log", golden)
      yield* sql(`CREATE MATERIALIZED VIEW totals ENGINE = Log AS SELECT x FROM \`${golden}\`.raw`, golden)
      const error = yield* Effect.flip(clickhouseAdapter.clone(sliceOf(golden), sliceOf(copy)))
      expect(error.message).toContain("materialized views (totals)")
      expect(yield* sql(`SELECT count() FROM system.tables WHERE database = '${copy}'`)).toBe("0\n")
      expect(yield* clickhouseAdapter.list(sliceOf(copy))).toContain(copy)
    })
  )

  it.live("reports refused credentials as authentication, without the password", () =>
    Effect.gen(function* () {
      const url = new URL(adminUrl)
      url.username = "default"
      url.password = "hunter2"
      const error = yield* Effect.flip(clickhouseAdapter.provision(sliceOf(fresh("auth"), { adminUrl: url.href })))
      expect(error.kind).toBe("authentication")
      expect(error.message).not.toContain("hunter2")
      const nobody = new URL(adminUrl)
      nobody.username = "nobody_here"
      expect((yield* Effect.flip(clickhouseAdapter.list(sliceOf("x", { adminUrl: nobody.href })))).kind).toBe(
        "authentication"
      )
    })
  )

  it.live("refuses reserved names and a non-http admin_url", () =>
    Effect.gen(function* () {
      for (const name of ["berth_meta", "system", "default"]) {
        expect((yield* Effect.flip(clickhouseAdapter.provision(sliceOf(name)))).kind).toBe("invalid")
      }
      const bad = sliceOf(fresh("bad"), { adminUrl: "clickhouse://127.0.0.1:9000" })
      expect((yield* Effect.flip(clickhouseAdapter.provision(bad))).kind).toBe("invalid")
    })
  )
})
