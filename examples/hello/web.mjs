// The web front of the hello example: calls the api of its own world through API_URL.
import { createServer } from "node:http"

const port = Number(process.env.PORT)
const apiUrl = process.env.API_URL

createServer(async (req, res) => {
  if (req.url === "/healthz") return res.end("ok")
  try {
    const api = await (await fetch(apiUrl)).json()
    res.setHeader("content-type", "text/plain")
    const database = api.database?.split("/").pop()
    res.end(`${process.env.GREETING}; api says it serves world ${api.world} from database ${database}\n`)
  } catch (e) {
    res.statusCode = 502
    res.end(`cannot reach the api at ${apiUrl}: ${e.message}\n`)
  }
}).listen(port, "127.0.0.1", () => console.log(`web listening on ${port}`))
