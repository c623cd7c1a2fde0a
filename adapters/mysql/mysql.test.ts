import { afterAll, describe, expect, it } from "@effect/vitest"
import * as Effect from "effect/Effect"
import { type Connection, createConnection } from "mysql2/promise"
import { runNames, runOwner, sliceMaker } from "../testing.js"
import { beforeMark, mysqlAdapter } from "./index.js"

/** A real server: `MYSQL_ADMIN_URL`, or the local MariaDB (root, no password). */
const adminUrl = process.env.MYSQL_ADMIN_URL ?? "mysql://root@127.0.0.1:3306/"

/** Every database and account a test makes starts with `prefix`, so parallel runs never meet and afterAll finds them. */
const { prefix, fresh } = runNames()

/** this run's installation: another owner's slices are never ours */
const owner = runOwner()

const sliceOf = sliceMaker({ adapter: "mariadb", service: "db", owner, adminUrl })

type Row = Record<string, unknown>

/** Runs `f` on a connection to `url`, always closed; a connection killed under it is not a crash. */
const withConnection = async <A>(url: string, f: (connection: Connection) => Promise<A>): Promise<A> => {
  const connection = await createConnection({ uri: url })
  connection.on("error", () => undefined)
  try {
    return await f(connection)
  } finally {
    await connection.end().catch(() => connection.destroy())
  }
}

const rowsOf = async (connection: Connection, text: string, values: ReadonlyArray<unknown> = []) => {
  const [result] = await connection.query(text, [...values])
  return (Array.isArray(result) ? result : []) as Array<Row>
}

const sql = (url: string, text: string, values: ReadonlyArray<unknown> = []): Effect.Effect<Array<Row>> =>
  Effect.promise(() => withConnection(url, (connection) => rowsOf(connection, text, values)))

/** The server's error number for a statement that must fail. */
const errnoOf = (url: string, text: string): Effect.Effect<number | undefined> =>
  Effect.promise(() =>
    withConnection(url, (connection) =>
      connection.query(text).then(
        () => undefined,
        (error: { readonly errno?: number }) => error.errno
      )
    )
  )

const exists = (name: string): Effect.Effect<boolean> =>
  Effect.map(
    sql(adminUrl, "SELECT 1 FROM information_schema.SCHEMATA WHERE SCHEMA_NAME = ?", [name]),
    (rows) => rows.length === 1
  )

const listed = (by = owner): Effect.Effect<ReadonlyArray<string>, unknown> =>
  Effect.map(mysqlAdapter.list({ storage: "/nonexistent", adminUrl, options: {}, owner: by }), (names) =>
    names.filter((name) => name.startsWith(prefix))
  )

const resolved = (name: string): Effect.Effect<string, unknown> => mysqlAdapter.resolve(sliceOf(name))

afterAll(async () => {
  await withConnection(adminUrl, async (connection) => {
    const databases = await rowsOf(connection, "SELECT SCHEMA_NAME AS name FROM information_schema.SCHEMATA")
    for (const { name } of databases) {
      if (String(name).startsWith(prefix)) await connection.query(`DROP DATABASE IF EXISTS \`${String(name)}\``)
    }
    // berth_meta itself is shared with every other run and with berth: only this run's rows go
    const tables = await rowsOf(
      connection,
      "SELECT TABLE_NAME AS name FROM information_schema.TABLES WHERE TABLE_SCHEMA = 'berth_meta' AND TABLE_NAME IN ('slices', 'pending')"
    )
    for (const { name } of tables) {
      await connection.query(`DELETE FROM berth_meta.\`${String(name)}\` WHERE LEFT(name, ?) = ? OR owner = ?`, [
        prefix.length,
        prefix,
        owner
      ])
    }
    const users = await rowsOf(
      connection,
      "SELECT User AS user, Host AS host FROM mysql.user WHERE LEFT(User, ?) = ?",
      [prefix.length, prefix]
    )
    for (const { user, host } of users) await connection.query("DROP USER IF EXISTS ?@?", [user, host])
  })
})

describe("mysqlAdapter", () => {
  it("declares clone", () => {
    expect(mysqlAdapter.capabilities).toEqual({ clone: true })
  })

  it.live("marks the database it provisions in berth_meta (not inside the slice), and lists it", () =>
    Effect.gen(function* () {
      const name = fresh("main_db")
      expect(yield* mysqlAdapter.provision(sliceOf(name))).toBe(true)
      expect(yield* sql(adminUrl, "SELECT owner FROM berth_meta.slices WHERE name = ?", [name])).toEqual([{ owner }])
      // an app's migration tool may insist on an empty database
      expect(
        yield* sql(adminUrl, "SELECT TABLE_NAME FROM information_schema.TABLES WHERE TABLE_SCHEMA = ?", [name])
      ).toEqual([])
      expect(yield* listed()).toContain(name)
    })
  )

  it.live("resolves to the admin URL with the slice's database, and the URL works", () =>
    Effect.gen(function* () {
      expect(
        yield* mysqlAdapter.resolve(sliceOf("acme_db", { adminUrl: "mysql://app:s3cret@db.local:3307/?ssl=%7B%7D" }))
      ).toBe("mysql://app:s3cret@db.local:3307/acme_db?ssl=%7B%7D")
      expect(yield* mysqlAdapter.resolve(sliceOf("acme_db", { adminUrl: "mariadb://root@127.0.0.1/mysql" }))).toBe(
        "mariadb://root@127.0.0.1/acme_db"
      )
      const name = fresh("resolve")
      yield* mysqlAdapter.provision(sliceOf(name))
      const url = yield* resolved(name)
      yield* sql(url, "CREATE TABLE notes (id INT PRIMARY KEY, note VARCHAR(20))")
      yield* sql(url, "INSERT INTO notes VALUES (1, 'hello')")
      expect(yield* sql(url, "SELECT DATABASE() AS db, note FROM notes")).toEqual([{ db: name, note: "hello" }])
    })
  )

  it.live("tears down an owned database even while a session holds it in a transaction", () =>
    Effect.gen(function* () {
      const name = fresh("gone")
      yield* mysqlAdapter.provision(sliceOf(name))
      const url = yield* resolved(name)
      yield* sql(url, "CREATE TABLE t (v INT)")
      // an open transaction that read a table holds a metadata lock that DROP DATABASE would wait on
      const holder = yield* Effect.promise(() => createConnection({ uri: url }))
      holder.on("error", () => undefined)
      yield* Effect.promise(() => holder.query("START TRANSACTION"))
      yield* Effect.promise(() => holder.query("SELECT * FROM t"))
      yield* Effect.ensuring(
        mysqlAdapter.teardown(sliceOf(name)),
        Effect.sync(() => holder.destroy())
      )
      expect(yield* exists(name)).toBe(false)
      expect(yield* sql(adminUrl, "SELECT name FROM berth_meta.slices WHERE name = ?", [name])).toEqual([])
      expect(yield* listed()).not.toContain(name)
    })
  )

  it.live("a provision killed before its mark: listed, made again by provision or clone, dropped by teardown", () =>
    Effect.gen(function* () {
      const name = fresh("crash")
      yield* beforeMark.provision(sliceOf(name))
      expect(yield* exists(name)).toBe(true)
      // gc sees it as this installation's
      expect(yield* listed()).toContain(name)
      // a later provision of the same slice is not blocked: it makes the slice again, marked, and says so
      expect(yield* mysqlAdapter.provision(sliceOf(name))).toBe(true)
      expect(yield* sql(adminUrl, "SELECT owner FROM berth_meta.slices WHERE name = ?", [name])).toEqual([{ owner }])
      expect(yield* mysqlAdapter.provision(sliceOf(name))).toBe(false)
      // teardown drops one that was never finished
      yield* mysqlAdapter.teardown(sliceOf(name))
      yield* beforeMark.provision(sliceOf(name))
      yield* mysqlAdapter.teardown(sliceOf(name))
      expect(yield* exists(name)).toBe(false)
      expect(yield* listed()).not.toContain(name)
      // and so does a clone into it
      const golden = fresh("crash_golden")
      yield* mysqlAdapter.provision(sliceOf(golden))
      yield* sql(yield* resolved(golden), "CREATE TABLE t (v INT)")
      yield* beforeMark.provision(sliceOf(name))
      yield* mysqlAdapter.clone(sliceOf(golden), sliceOf(name))
      expect(yield* sql(yield* resolved(name), "SHOW TABLES")).toHaveLength(1)
      expect(yield* listed()).toContain(name)
    })
  )

  it.live("a half-made database that someone filled since, or that another installation left, is left alone", () =>
    Effect.gen(function* () {
      // berth's intent, then someone else's data in the database: not provably berth's, so not ours to drop
      const filled = fresh("crash_filled")
      yield* beforeMark.provision(sliceOf(filled))
      yield* sql(adminUrl, `CREATE TABLE \`${filled}\`.precious (v INT)`)
      expect(yield* listed()).not.toContain(filled)
      expect((yield* Effect.flip(mysqlAdapter.provision(sliceOf(filled)))).kind).toBe("taken")
      expect((yield* Effect.flip(mysqlAdapter.teardown(sliceOf(filled)))).kind).toBe("not-owned")
      expect(yield* exists(filled)).toBe(true)
      // another installation's half-made one
      const theirs = fresh("crash_theirs")
      yield* beforeMark.provision(sliceOf(theirs, { owner: "elsewhere" }))
      expect(yield* listed()).not.toContain(theirs)
      expect((yield* Effect.flip(mysqlAdapter.provision(sliceOf(theirs)))).kind).toBe("taken")
      expect((yield* Effect.flip(mysqlAdapter.teardown(sliceOf(theirs)))).kind).toBe("not-owned")
      expect(yield* exists(theirs)).toBe(true)
      expect(yield* listed("elsewhere")).toContain(theirs)
    })
  )

  it.live("a mark left without its database (a crash between drop and unmark) is not listed and is cleared", () =>
    Effect.gen(function* () {
      const name = fresh("stale")
      yield* mysqlAdapter.provision(sliceOf(fresh("meta_exists")))
      yield* sql(adminUrl, "INSERT INTO berth_meta.slices (name, owner) VALUES (?, ?)", [name, owner])
      expect(yield* listed()).not.toContain(name)
      expect(yield* mysqlAdapter.provision(sliceOf(name))).toBe(true)
      expect(yield* listed()).toContain(name)
      yield* sql(adminUrl, `DROP DATABASE \`${name}\``)
      yield* mysqlAdapter.teardown(sliceOf(name))
      expect(yield* sql(adminUrl, "SELECT name FROM berth_meta.slices WHERE name = ?", [name])).toEqual([])
    })
  )

  it.live("clones tables, indexes, foreign keys, generated columns, views, routines and triggers", () =>
    Effect.gen(function* () {
      const golden = fresh("golden")
      const copy = fresh("copy")
      yield* mysqlAdapter.provision(sliceOf(golden))
      yield* mysqlAdapter.provision(sliceOf(copy))
      const goldenUrl = yield* resolved(golden)
      const copyUrl = yield* resolved(copy)
      for (const statement of [
        "CREATE TABLE authors (id INT AUTO_INCREMENT PRIMARY KEY, name VARCHAR(50) NOT NULL, UNIQUE KEY authors_name (name))",
        `CREATE TABLE books (
           id INT AUTO_INCREMENT PRIMARY KEY,
           author_id INT NOT NULL,
           title VARCHAR(100) NOT NULL,
           price_cents INT NOT NULL,
           price_eur DECIMAL(10,2) AS (price_cents / 100) STORED,
           title_length INT AS (CHAR_LENGTH(title)) VIRTUAL,
           KEY books_title (title),
           CONSTRAINT books_author FOREIGN KEY (author_id) REFERENCES authors (id) ON DELETE CASCADE
         )`,
        "CREATE TABLE audit (id INT AUTO_INCREMENT PRIMARY KEY, note VARCHAR(200) NOT NULL)",
        "INSERT INTO authors (name) VALUES ('Ada'), ('Brian')",
        "CREATE TRIGGER books_audit AFTER INSERT ON books FOR EACH ROW INSERT INTO audit (note) VALUES (CONCAT('added ', NEW.title))",
        // kept as written: a name qualified with the golden's schema, unquoted, must come to mean the copy's
        `CREATE TRIGGER books_trim BEFORE INSERT ON ${golden}.books FOR EACH ROW SET NEW.title = TRIM(NEW.title)`,
        "INSERT INTO books (author_id, title, price_cents) VALUES (1, 'Notes', 950), (2, 'C', 4500)",
        "CREATE VIEW cheap_books AS SELECT b.title, a.name AS author FROM books b JOIN authors a ON a.id = b.author_id WHERE b.price_cents < 1000",
        // sorts before the view it reads: it can only be created on a second round
        "CREATE VIEW a_cheap_titles AS SELECT title FROM cheap_books",
        `CREATE PROCEDURE add_book(IN author INT, IN book_title VARCHAR(100), IN cents INT)
         BEGIN INSERT INTO books (author_id, title, price_cents) VALUES (author, book_title, cents); END`,
        "CREATE FUNCTION books_by(author INT) RETURNS INT READS SQL DATA RETURN (SELECT COUNT(*) FROM books WHERE author_id = author)"
      ]) {
        yield* sql(goldenUrl, statement)
      }
      yield* sql(copyUrl, "CREATE TABLE leftover (v INT)")

      yield* mysqlAdapter.clone(sliceOf(golden), sliceOf(copy))

      // the target started empty: what it held before is gone
      expect(
        yield* sql(
          adminUrl,
          "SELECT TABLE_NAME AS t, TABLE_TYPE AS type FROM information_schema.TABLES WHERE TABLE_SCHEMA = ? ORDER BY BINARY TABLE_NAME",
          [copy]
        )
      ).toEqual([
        { t: "a_cheap_titles", type: "VIEW" },
        { t: "audit", type: "BASE TABLE" },
        { t: "authors", type: "BASE TABLE" },
        { t: "books", type: "BASE TABLE" },
        { t: "cheap_books", type: "VIEW" }
      ])
      // rows, with generated columns computed again
      expect(yield* sql(copyUrl, "SELECT id, name FROM authors ORDER BY id")).toEqual([
        { id: 1, name: "Ada" },
        { id: 2, name: "Brian" }
      ])
      expect(yield* sql(copyUrl, "SELECT id, title, price_eur, title_length FROM books ORDER BY id")).toEqual([
        { id: 1, title: "Notes", price_eur: "9.50", title_length: 5 },
        { id: 2, title: "C", price_eur: "45.00", title_length: 1 }
      ])
      // copying rows fired no trigger
      expect(yield* sql(copyUrl, "SELECT note FROM audit ORDER BY id")).toEqual([
        { note: "added Notes" },
        { note: "added C" }
      ])
      // indexes: a plain one exists, a unique one is enforced
      expect(
        (yield* sql(copyUrl, "SHOW INDEX FROM books")).map((row) => row.Key_name).filter((key) => key === "books_title")
      ).toEqual(["books_title"])
      expect(yield* errnoOf(copyUrl, "INSERT INTO authors (name) VALUES ('Ada')")).toBe(1062)
      // the foreign key exists, points at the copy and is enforced
      expect(
        yield* sql(
          adminUrl,
          "SELECT REFERENCED_TABLE_SCHEMA AS s, REFERENCED_TABLE_NAME AS t FROM information_schema.KEY_COLUMN_USAGE WHERE TABLE_SCHEMA = ? AND CONSTRAINT_NAME = 'books_author'",
          [copy]
        )
      ).toEqual([{ s: copy, t: "authors" }])
      expect(yield* errnoOf(copyUrl, "INSERT INTO books (author_id, title, price_cents) VALUES (99, 'x', 1)")).toBe(
        1452
      )
      // views read the copy, never the golden
      for (const row of yield* sql(
        adminUrl,
        "SELECT VIEW_DEFINITION AS body FROM information_schema.VIEWS WHERE TABLE_SCHEMA = ?",
        [copy]
      )) {
        expect(String(row.body)).not.toContain(golden)
      }
      // the procedure writes into the copy, and the trigger fires there
      yield* sql(copyUrl, "CALL add_book(1, '  Dune ', 500)")
      expect(yield* sql(copyUrl, "SELECT title, price_eur FROM books WHERE title = 'Dune'")).toEqual([
        { title: "Dune", price_eur: "5.00" }
      ])
      expect(yield* sql(copyUrl, "SELECT note FROM audit ORDER BY id")).toEqual([
        { note: "added Notes" },
        { note: "added C" },
        { note: "added Dune" }
      ])
      expect(yield* sql(copyUrl, "SELECT title FROM a_cheap_titles ORDER BY title")).toEqual([
        { title: "Dune" },
        { title: "Notes" }
      ])
      expect(yield* sql(copyUrl, "SELECT books_by(1) AS n")).toEqual([{ n: 2 }])
      // ON DELETE CASCADE works in the copy
      yield* sql(copyUrl, "DELETE FROM authors WHERE id = 2")
      expect(yield* sql(copyUrl, "SELECT COUNT(*) AS n FROM books WHERE author_id = 2")).toEqual([{ n: 0 }])
      // the golden is untouched
      expect(yield* sql(goldenUrl, "SELECT COUNT(*) AS n FROM books")).toEqual([{ n: 2 }])
      expect(yield* sql(goldenUrl, "SELECT COUNT(*) AS n FROM audit")).toEqual([{ n: 2 }])
      expect(yield* sql(goldenUrl, "SELECT books_by(1) AS n, books_by(2) AS m")).toEqual([{ n: 1, m: 1 }])
      expect(yield* sql(goldenUrl, "SELECT title FROM a_cheap_titles")).toEqual([{ title: "Notes" }])

      // the copy is an owned slice; cloning again replaces what it holds
      expect(yield* listed()).toEqual(expect.arrayContaining([golden, copy]))
      expect(yield* mysqlAdapter.provision(sliceOf(copy))).toBe(false)
      yield* mysqlAdapter.clone(sliceOf(golden), sliceOf(copy))
      expect(yield* sql(copyUrl, "SELECT COUNT(*) AS n FROM books")).toEqual([{ n: 2 }])
      // a clone into a missing target creates it
      const third = fresh("third")
      yield* mysqlAdapter.clone(sliceOf(golden), sliceOf(third))
      expect(yield* sql(yield* resolved(third), "SELECT COUNT(*) AS n FROM audit")).toEqual([{ n: 2 }])
      expect(yield* listed()).toContain(third)
    })
  )

  it.live("clones MariaDB sequences and system-versioned tables (on MariaDB)", () =>
    Effect.gen(function* () {
      const [version] = yield* sql(adminUrl, "SELECT VERSION() AS v")
      if (!String(version?.v).includes("MariaDB")) return
      const golden = fresh("g_maria")
      const copy = fresh("c_maria")
      yield* mysqlAdapter.provision(sliceOf(golden))
      const goldenUrl = yield* resolved(golden)
      yield* sql(goldenUrl, "CREATE SEQUENCE ticket START WITH 100")
      expect(yield* sql(goldenUrl, "SELECT NEXTVAL(ticket) AS n")).toEqual([{ n: 100 }])
      yield* sql(goldenUrl, "CREATE TABLE prices (id INT PRIMARY KEY, cents INT) WITH SYSTEM VERSIONING")
      yield* sql(goldenUrl, "INSERT INTO prices VALUES (1, 10)")
      yield* mysqlAdapter.clone(sliceOf(golden), sliceOf(copy))
      const copyUrl = yield* resolved(copy)
      // the copy goes on from where the golden's sequence stands, never back to its start
      const [next] = yield* sql(copyUrl, "SELECT NEXTVAL(ticket) AS n")
      expect(Number(next?.n)).toBeGreaterThan(100)
      expect(yield* sql(copyUrl, "SELECT id, cents FROM prices")).toEqual([{ id: 1, cents: 10 }])
    })
  )

  it.live("a clone that fails half way names what failed and leaves the target empty and owned", () =>
    Effect.gen(function* () {
      const golden = fresh("g_broken")
      const copy = fresh("c_broken")
      yield* mysqlAdapter.provision(sliceOf(golden))
      yield* mysqlAdapter.provision(sliceOf(copy))
      const goldenUrl = yield* resolved(golden)
      yield* sql(goldenUrl, "CREATE TABLE t (v INT)")
      yield* sql(goldenUrl, "INSERT INTO t VALUES (1)")
      // a view whose table is gone can be shown but not created again
      yield* sql(goldenUrl, "CREATE TABLE gone (v INT)")
      yield* sql(goldenUrl, "CREATE VIEW broken AS SELECT v FROM gone")
      yield* sql(goldenUrl, "DROP TABLE gone")
      yield* sql(yield* resolved(copy), "CREATE TABLE leftover (v INT)")
      const error = yield* Effect.flip(mysqlAdapter.clone(sliceOf(golden), sliceOf(copy)))
      expect(error.kind).toBe("failed")
      expect(error.message).toContain('view "broken"')
      expect(error.message).toContain(copy)
      expect(yield* exists(copy)).toBe(true)
      expect(
        yield* sql(adminUrl, "SELECT TABLE_NAME FROM information_schema.TABLES WHERE TABLE_SCHEMA = ?", [copy])
      ).toEqual([])
      expect(yield* listed()).toContain(copy)
    })
  )

  it.live("refuses to clone from a missing database, naming it", () =>
    Effect.gen(function* () {
      const missing = fresh("missing")
      const target = fresh("clone_target")
      const error = yield* Effect.flip(mysqlAdapter.clone(sliceOf(missing), sliceOf(target)))
      expect(error.kind).toBe("failed")
      expect(error.message).toContain(missing)
      expect(yield* exists(target)).toBe(false)
    })
  )

  it.live("refuses names outside its identifiers, reserved names, and unsafe owners", () =>
    Effect.gen(function* () {
      for (const name of [
        "x`; DROP DATABASE mysql; --",
        "Acme_db",
        "a;b",
        'a"b',
        "a.b",
        "1abc",
        "a-b",
        "berth_meta",
        "mysql",
        "information_schema"
      ]) {
        for (const verb of [
          mysqlAdapter.provision(sliceOf(name)),
          mysqlAdapter.resolve(sliceOf(name)),
          mysqlAdapter.teardown(sliceOf(name))
        ]) {
          const error = yield* Effect.flip(verb)
          expect(error.kind).toBe("invalid")
        }
      }
      expect((yield* Effect.flip(mysqlAdapter.clone(sliceOf("ok_name"), sliceOf("Bad")))).kind).toBe("invalid")
      expect((yield* Effect.flip(mysqlAdapter.provision(sliceOf("ok_name", { owner: "x'; --" })))).kind).toBe("invalid")
      expect((yield* Effect.flip(mysqlAdapter.list({ storage: "/x", adminUrl, options: {}, owner: "A B" }))).kind).toBe(
        "invalid"
      )
    })
  )

  it.live("needs a mysql:// admin_url, and never prints its password", () =>
    Effect.gen(function* () {
      const missing = yield* Effect.flip(mysqlAdapter.provision(sliceOf(fresh("no_admin"), { adminUrl: undefined })))
      expect(missing.kind).toBe("invalid")
      expect(missing.message).toContain("admin_url")
      const listing = yield* Effect.flip(mysqlAdapter.list({ storage: "/x", adminUrl: undefined, options: {}, owner }))
      expect(listing.kind).toBe("invalid")
      const bad = yield* Effect.flip(
        mysqlAdapter.provision(sliceOf(fresh("bad_admin"), { adminUrl: "not a url hunter2" }))
      )
      expect(bad.kind).toBe("invalid")
      expect(bad.message).not.toContain("hunter2")
      const scheme = yield* Effect.flip(
        mysqlAdapter.provision(sliceOf(fresh("pg_admin"), { adminUrl: "postgres://root:hunter2@127.0.0.1:3306/" }))
      )
      expect(scheme.kind).toBe("invalid")
      expect(scheme.message).not.toContain("hunter2")
    })
  )

  it.live("reports an unreachable server, naming host and port but not the password", () =>
    Effect.gen(function* () {
      const url = "mysql://root:hunter2@127.0.0.1:1/"
      const error = yield* Effect.flip(mysqlAdapter.provision(sliceOf("acme_db", { adminUrl: url })))
      expect(error.kind).toBe("unreachable")
      expect(error.adapter).toBe("mysql")
      expect(error.message).toContain("127.0.0.1:1")
      expect(error.message).toContain("acme_db")
      expect(error.message).not.toContain("hunter2")
      expect((yield* Effect.flip(mysqlAdapter.list({ storage: "/x", adminUrl: url, options: {}, owner }))).kind).toBe(
        "unreachable"
      )
    })
  )

  it.live("reports refused credentials as authentication, without the password", () =>
    Effect.gen(function* () {
      // the admin account with a wrong password, and an account that does not exist
      const wrong = new URL(adminUrl)
      wrong.password = "hunter2"
      const nobody = new URL(wrong.href)
      nobody.username = `${prefix}nobody`
      for (const url of [wrong.href, nobody.href]) {
        const error = yield* Effect.flip(mysqlAdapter.provision(sliceOf(fresh("auth"), { adminUrl: url })))
        expect(error.kind).toBe("authentication")
        expect(error.message).not.toContain("hunter2")
        const listing = yield* Effect.flip(mysqlAdapter.list({ storage: "/x", adminUrl: url, options: {}, owner }))
        expect(listing.kind).toBe("authentication")
      }
    })
  )

  it.live("reports a missing privilege as grant", () =>
    Effect.gen(function* () {
      // one account may use berth_meta but create no other database; one may do nothing at all
      const metaOnly = `${prefix}meta`
      const nothing = `${prefix}none`
      const password = "pw_hunter2"
      yield* mysqlAdapter.provision(sliceOf(fresh("meta_exists")))
      for (const user of [metaOnly, nothing]) {
        yield* sql(adminUrl, "CREATE USER ?@'%' IDENTIFIED BY ?", [user, password])
      }
      // `_` is a wildcard in a grant's database name
      yield* sql(adminUrl, "GRANT ALL ON `berth\\_meta`.* TO ?@'%'", [metaOnly])
      for (const user of [metaOnly, nothing]) {
        const url = new URL(adminUrl)
        url.username = user
        url.password = password
        const name = fresh("grant")
        const error = yield* Effect.flip(mysqlAdapter.provision(sliceOf(name, { adminUrl: url.href })))
        expect(error.kind).toBe("grant")
        expect(error.message).toContain(name)
        expect(error.message).not.toContain(password)
        expect(yield* exists(name)).toBe(false)
      }
    })
  )
})
