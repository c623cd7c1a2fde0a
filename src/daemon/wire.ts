/**
 * The smallest possible client of the daemon's socket: one request, one reply, newline-delimited JSON as @effect/rpc
 * writes it. It needs no Effect runtime, so the CLI's lean path (and the daemon's own start-up checks) stay fast.
 * Streaming requests are left to the full RpcClient.
 */
import * as net from "node:net"

export type WireReply =
  | { readonly _tag: "Success"; readonly value: unknown }
  | { readonly _tag: "Failure"; readonly error: unknown }
  | { readonly _tag: "Unreachable"; readonly reason: string }

interface ExitMessage {
  readonly _tag: string
  readonly requestId?: string
  readonly exit?: {
    readonly _tag: "Success" | "Failure"
    readonly value?: unknown
    readonly cause?: { readonly _tag: string; readonly error?: unknown; readonly defect?: unknown }
  }
}

/** Sends one request and resolves with its exit; never rejects. */
export const request = (socketPath: string, tag: string, payload: unknown, timeoutMs = 30_000): Promise<WireReply> =>
  new Promise((resolve) => {
    const socket = net.connect({ path: socketPath })
    let buffer = ""
    let settled = false
    const finish = (reply: WireReply) => {
      if (settled) return
      settled = true
      socket.destroy()
      resolve(reply)
    }
    socket.setTimeout(timeoutMs, () => finish({ _tag: "Unreachable", reason: "the daemon did not answer in time" }))
    socket.once("error", (e) => finish({ _tag: "Unreachable", reason: e.message }))
    socket.once("close", () => finish({ _tag: "Unreachable", reason: "the daemon closed the connection" }))
    socket.once("connect", () => {
      socket.write(`${JSON.stringify({ _tag: "Request", id: "1", tag, payload, headers: [] })}\n`)
    })
    socket.on("data", (chunk: Buffer) => {
      buffer += chunk.toString("utf8")
      for (let nl = buffer.indexOf("\n"); nl !== -1; nl = buffer.indexOf("\n")) {
        const line = buffer.slice(0, nl)
        buffer = buffer.slice(nl + 1)
        let message: ExitMessage
        try {
          message = JSON.parse(line) as ExitMessage
        } catch {
          continue
        }
        if (message._tag !== "Exit" || message.requestId !== "1" || message.exit === undefined) continue
        const exit = message.exit
        if (exit._tag === "Success") return finish({ _tag: "Success", value: exit.value })
        const cause = exit.cause
        return finish({ _tag: "Failure", error: cause?._tag === "Fail" ? cause.error : (cause?.defect ?? cause) })
      }
    })
  })
