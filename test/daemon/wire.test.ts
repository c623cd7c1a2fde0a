/**
 * The lean path's exchange with the daemon. Found by bench/cluster with 50 worlds per machine: an `up` that waited in
 * line (the 21st world, behind max_parallel) was cut off by the connection's idle limit after 10 minutes, which
 * withdrew the world from the line and said the daemon had stopped. A change must wait as long as the daemon takes;
 * the daemon going away still ends the wait at once.
 */
import { mkdtempSync, rmSync } from "node:fs"
import * as net from "node:net"
import { tmpdir } from "node:os"
import { join } from "node:path"
import { afterAll, describe, expect, it } from "@effect/vitest"
import { CHANGE_IDLE_TIMEOUT_MS } from "../../src/cli/fast.js"
import { exchange } from "../../src/daemon/wire.js"

const base = mkdtempSync(join(tmpdir(), "berth-wire-"))
afterAll(() => rmSync(base, { recursive: true, force: true }))

/** A daemon stand-in on a unix socket: answers each request after `delayMs`, or closes the connection then. */
const daemon = async (name: string, delayMs: number, close = false) => {
  const path = join(base, name)
  const server = net.createServer((socket) => {
    let buffer = ""
    socket.on("data", (chunk: Buffer) => {
      buffer += chunk.toString()
      for (let nl = buffer.indexOf("\n"); nl !== -1; nl = buffer.indexOf("\n")) {
        const request = JSON.parse(buffer.slice(0, nl)) as { id: string }
        buffer = buffer.slice(nl + 1)
        setTimeout(() => {
          if (close) return socket.destroy()
          socket.write(
            `${JSON.stringify({ _tag: "Exit", requestId: request.id, exit: { _tag: "Success", value: "done" } })}\n`
          )
        }, delayMs)
      }
    })
  })
  await new Promise<void>((resolve) => server.listen(path, resolve))
  return { path, close: () => new Promise<void>((resolve) => server.close(() => resolve())) }
}

describe("the lean path's exchange", () => {
  it("waits for a change as long as the daemon takes: a change has no idle limit", async () => {
    expect(CHANGE_IDLE_TIMEOUT_MS).toBe(0)
    const slow = await daemon("slow.sock", 1_500)
    try {
      // with a limit shorter than the daemon's answer, the wait is cut (what happened after 10 minutes in line)
      const cut = await exchange(slow.path, [{ tag: "Up", payload: {} }], 500)
      expect(cut[0]?._tag).toBe("Unreachable")
      // with the change's own limit, the answer comes
      const waited = await exchange(slow.path, [{ tag: "Up", payload: {} }], CHANGE_IDLE_TIMEOUT_MS)
      expect(waited[0]).toEqual({ _tag: "Success", value: "done" })
    } finally {
      await slow.close()
    }
  })

  it("still ends the wait at once when the daemon goes away", async () => {
    const dying = await daemon("dying.sock", 200, true)
    try {
      const replies = await exchange(dying.path, [{ tag: "Up", payload: {} }], CHANGE_IDLE_TIMEOUT_MS)
      expect(replies[0]).toEqual({ _tag: "Unreachable", reason: "the daemon closed the connection" })
    } finally {
      await dying.close()
    }
  })
})
