/**
 * Joining a cluster on a port another program holds: refused before anything is written (the database is not even
 * reached), naming the port and the option that picks another — it said the cluster's database could not be used.
 */
import * as net from "node:net"
import { networkInterfaces } from "node:os"
import { afterAll, describe, expect, it } from "vitest"
import { sandbox } from "./harness.js"

/** this machine's first address another machine could reach, as `cluster join` picks it */
const address = Object.values(networkInterfaces())
  .flat()
  .find((e) => e !== undefined && e.family === "IPv4" && !e.internal)?.address

const holders: Array<net.Server> = []
afterAll(() => {
  for (const h of holders) h.close()
})

/** a listener on an ephemeral port of `host`, held until the file's tests end */
const hold = (host: string) =>
  new Promise<number>((resolve) => {
    const server = net.createServer().listen(0, host, () => {
      holders.push(server)
      resolve((server.address() as net.AddressInfo).port)
    })
  })

/** whether `port` of `host` can be listened on now */
const free = (port: number, host: string) =>
  new Promise<boolean>((resolve) => {
    const server = net.createServer()
    server.once("error", () => resolve(false))
    server.listen(port, host, () => server.close(() => resolve(true)))
  })

describe.skipIf(address === undefined)("berth cluster join on a taken port", () => {
  it("names the port and --runner-port, and joins nothing", async () => {
    const box = sandbox()
    try {
      // nothing listens there: the refusal must come before the database is asked
      const url = "postgres://postgres@127.0.0.1:5432/berth_no_such_cluster_db"
      const taken = await hold(address!)
      const runner = await box.run(["cluster", "init", url, "--runner-port", String(taken), "--name", "m1"])
      expect(runner.code).toBe(1)
      expect(runner.stderr).toContain(`port ${taken} on ${address}, the runner port, is taken by another program`)
      expect(runner.stderr).toContain("hint: pass --runner-port")
      expect(runner.stderr).not.toContain("cannot use the cluster's database")
      // the port after the runner's carries the cluster's URLs: taken, it is named too
      let next = await hold(address!)
      // the runner port itself must be free for the second check to be the one that speaks
      while (!(await free(next - 1, address!))) next = await hold(address!)
      const urls = await box.run(["cluster", "join", url, "--runner-port", String(next - 1), "--name", "m1"])
      expect(urls.code).toBe(1)
      expect(urls.stderr).toContain(`port ${next} on ${address}, the port after the runner port`)
      const status = await box.run(["cluster", "status", "--json"])
      expect(JSON.parse(status.stdout)).toMatchObject({ state: "solo" })
    } finally {
      box.cleanup()
    }
  })
})

describe("a world that runs anywhere, on a machine in no cluster", () => {
  it("is refused with ClusterRefused and the command that joins one, and nothing is made", async () => {
    const box = sandbox({ "berth.toml": `[services.api]\ncmd = "sleep 60"\n` })
    try {
      const r = await box.run(["up", "far", "--anywhere", "--json"])
      expect(r.code).toBe(1)
      const error = (JSON.parse(r.stdout || r.stderr) as { error: { tag: string; message: string; hint: string } })
        .error
      expect(error.tag).toBe("ClusterRefused")
      expect(error.message).toContain("a world runs anywhere only in a cluster")
      expect(error.hint).toContain("berth cluster join <postgres url>")
      const status = await box.run(["status", "--json"])
      expect((JSON.parse(status.stdout) as { worlds: ReadonlyArray<unknown> }).worlds).toEqual([])
    } finally {
      box.cleanup()
    }
  })
})
