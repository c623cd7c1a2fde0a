/**
 * The smallest possible client of the daemon's socket: requests and their replies, newline-delimited JSON as
 * @effect/rpc writes it. It needs no Effect runtime, so the CLI's lean path (and the daemon's own start-up checks)
 * stay fast. Streaming requests are left to the full RpcClient.
 */

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

export interface WireRequest {
  readonly tag: string
  readonly payload: unknown
}

/** What to send next on the same connection, once every reply so far has come; undefined: nothing. */
export type FollowUp = (
  replies: ReadonlyArray<WireReply>
) => { readonly requests: ReadonlyArray<WireRequest>; readonly timeoutMs: number } | undefined

/**
 * Sends requests on one connection and resolves with their replies, in order; never rejects. `next` may send more on
 * the same connection once they are all answered (a change after the version check, without a second connection);
 * their replies follow. `signal` drops the connection (an answer no longer wanted must not keep the process alive).
 */
export const exchange = async (
  socketPath: string,
  requests: ReadonlyArray<WireRequest>,
  timeoutMs = 30_000,
  next?: FollowUp,
  signal?: AbortSignal
): Promise<ReadonlyArray<WireReply>> => {
  // loaded here, not at the top: the CLI's entry bundles this module and must not load node:net for `--version`
  const net = await import("node:net")
  return new Promise((resolve) => {
    const replies = new Map<string, WireReply>()
    const socket = net.connect({ path: socketPath })
    /** every request of the connection, its id its place here (1-based) */
    const sent = [...requests]
    let buffer = ""
    let settled = false
    const inOrder = (failure?: string): ReadonlyArray<WireReply> =>
      sent.map(
        (_, i) => replies.get(String(i + 1)) ?? { _tag: "Unreachable", reason: failure ?? "no reply from the daemon" }
      )
    const onAbort = () => finish("no longer wanted")
    const finish = (failure?: string) => {
      if (settled) return
      settled = true
      // a signal may serve many exchanges
      signal?.removeEventListener("abort", onAbort)
      socket.destroy()
      resolve(inOrder(failure))
    }
    const write = (from: number) =>
      socket.write(
        sent
          .slice(from)
          .map(
            (r, i) =>
              `${JSON.stringify({ _tag: "Request", id: String(from + i + 1), tag: r.tag, payload: r.payload, headers: [] })}\n`
          )
          .join("")
      )
    socket.setTimeout(timeoutMs, () => finish("the daemon did not answer in time"))
    if (signal?.aborted === true) return onAbort()
    signal?.addEventListener("abort", onAbort, { once: true })
    socket.once("error", (e) => finish(e.message))
    socket.once("close", () => finish("the daemon closed the connection"))
    socket.once("connect", () => write(0))
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
        // a defect ends the whole connection (e.g. a request this daemon does not know)
        if (message._tag === "Defect") return finish("the daemon could not handle the request")
        if (message._tag !== "Exit" || message.requestId === undefined || message.exit === undefined) continue
        const exit = message.exit
        const cause = exit.cause
        replies.set(
          message.requestId,
          exit._tag === "Success"
            ? { _tag: "Success", value: exit.value }
            : { _tag: "Failure", error: cause?._tag === "Fail" ? cause.error : (cause?.defect ?? cause) }
        )
        if (replies.size < sent.length) continue
        const more = next?.(inOrder())
        next = undefined
        if (more === undefined || more.requests.length === 0) return finish()
        const from = sent.length
        sent.push(...more.requests)
        socket.setTimeout(more.timeoutMs)
        write(from)
      }
    })
  })
}

/** One request, one reply. */
export const request = async (socketPath: string, tag: string, payload: unknown, timeoutMs = 30_000) =>
  (await exchange(socketPath, [{ tag, payload }], timeoutMs))[0]!
