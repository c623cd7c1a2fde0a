// The shop's app: one HTTP server that takes orders. Each order is a row in PostgreSQL, an INCR of a Redis counter
// and a message on a RabbitMQ queue, and every one of them lands in this world's own slices, because berth hands each
// world its own DATABASE_URL, REDIS_URL and AMQP_URL. CommonJS, so that NODE_PATH can supply pg, ioredis and amqplib.
const { createServer } = require("node:http")
const amqp = require("amqplib")
const { Redis } = require("ioredis")
const { Pool } = require("pg")

const QUEUE = "orders"
const COUNTER = "orders:count"
const world = process.env.BERTH_WORLD ?? "?"

const required = (name) => {
  const value = process.env[name]
  if (!value) throw new Error(`${name} is not set: run the app with berth (berth up), which sets it`)
  return value
}

/** The last path segment of a URL: the slice's name (database, Redis DB number, vhost), never its credentials. */
const sliceOf = (url) => decodeURIComponent(new URL(url).pathname.replace(/^\//, ""))

const readBody = (req) =>
  new Promise((resolve, reject) => {
    let body = ""
    req.setEncoding("utf8")
    req.on("data", (chunk) => {
      body += chunk
      if (body.length > 64 * 1024) reject(new Error("request body too large"))
    })
    req.on("end", () => resolve(body))
    req.on("error", reject)
  })

const itemOf = (body) => {
  if (body.trim() === "") return "an order"
  const { item } = JSON.parse(body)
  if (typeof item !== "string" || item === "" || item.length > 200) throw new Error("item must be a short string")
  return item
}

const main = async () => {
  const databaseUrl = required("DATABASE_URL")
  const redisUrl = required("REDIS_URL")
  const amqpUrl = required("AMQP_URL")
  const slices = { database: sliceOf(databaseUrl), redisDb: Number(sliceOf(redisUrl) || 0), vhost: sliceOf(amqpUrl) }

  const pool = new Pool({ connectionString: databaseUrl, max: 4 })
  await pool.query("SELECT 1")
  const redis = new Redis(redisUrl, { lazyConnect: true, maxRetriesPerRequest: 2 })
  await redis.connect()
  const connection = await amqp.connect(amqpUrl)
  // a confirm channel: an order is answered only once the broker holds its message, so /state counts it at once
  const channel = await connection.createConfirmChannel()
  await channel.assertQueue(QUEUE, { durable: true })

  let stopping = false
  const lost = (what) => (e) => {
    if (stopping) return
    console.error(`lost the ${what} connection${e ? `: ${e.message}` : ""}`)
    process.exit(1)
  }
  connection.on("error", lost("RabbitMQ"))
  connection.on("close", lost("RabbitMQ"))
  pool.on("error", lost("PostgreSQL"))

  const placeOrder = async (item) => {
    const { rows } = await pool.query("INSERT INTO orders (item) VALUES ($1) RETURNING id, item", [item])
    const counter = await redis.incr(COUNTER)
    channel.sendToQueue(QUEUE, Buffer.from(JSON.stringify({ ...rows[0], world })), { persistent: true })
    await channel.waitForConfirms()
    return { world, order: rows[0], counter }
  }

  const state = async () => {
    const { rows } = await pool.query("SELECT id, item FROM orders ORDER BY id")
    const counter = Number((await redis.get(COUNTER)) ?? 0)
    const { messageCount } = await channel.checkQueue(QUEUE)
    return { world, ...slices, orders: rows, counter, queued: messageCount }
  }

  const reply = (res, status, value) => {
    res.statusCode = status
    res.setHeader("content-type", "application/json")
    res.end(`${JSON.stringify(value)}\n`)
  }

  const server = createServer(async (req, res) => {
    try {
      const path = new URL(req.url ?? "/", "http://app").pathname
      if (req.method === "GET" && path === "/healthz") return res.end("ok")
      if (req.method === "GET" && path === "/state") return reply(res, 200, await state())
      if (req.method === "POST" && path === "/orders") {
        let item
        try {
          item = itemOf(await readBody(req))
        } catch (e) {
          return reply(res, 400, { error: e.message })
        }
        return reply(res, 201, await placeOrder(item))
      }
      reply(res, 404, { error: "try GET /state, POST /orders or GET /healthz" })
    } catch (e) {
      console.error(`${req.method} ${req.url} failed: ${e.message}`)
      reply(res, 500, { error: e.message })
    }
  })

  const stop = async () => {
    stopping = true
    server.close()
    await Promise.allSettled([connection.close(), redis.quit(), pool.end()])
    process.exit(0)
  }
  process.once("SIGTERM", stop)
  process.once("SIGINT", stop)

  const port = Number(required("PORT"))
  server.listen(port, "127.0.0.1", () =>
    console.log(
      `shop app of world ${world} on ${port}: database ${slices.database}, Redis DB ${slices.redisDb}, vhost ${slices.vhost}`
    )
  )
}

main().catch((e) => {
  console.error(`app.cjs: ${e.message}`)
  process.exit(1)
})
