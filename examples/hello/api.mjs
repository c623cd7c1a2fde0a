// The api of the hello example: answers with the world it belongs to and the database berth made for that world.
import { createServer } from "node:http"

const port = Number(process.env.PORT)
const world = process.env.BERTH_WORLD ?? "?"

createServer((req, res) => {
  if (req.url === "/healthz") return res.end("ok")
  res.setHeader("content-type", "application/json")
  res.end(JSON.stringify({ service: "api", world, pid: process.pid, database: process.env.DATABASE_URL }))
}).listen(port, "127.0.0.1", () => console.log(`api listening on ${port}`))
