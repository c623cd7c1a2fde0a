/**
 * Connections to backends. Dev servers listen on 127.0.0.1, on ::1, or on both, and `localhost` resolves to only
 * one of them on many machines, so the proxy dials 127.0.0.1 and falls back to ::1 when refused (or the other way
 * round), remembering per port which one answered. Every socket is tracked so the proxy can close them all.
 */
import * as http from "node:http"
import * as net from "node:net"
import type * as stream from "node:stream"

type Loopback = "127.0.0.1" | "::1"

const FALLBACK_CODES = new Set(["ECONNREFUSED", "EADDRNOTAVAIL", "EAFNOSUPPORT", "ENETUNREACH", "EHOSTUNREACH"])
const CONNECT_TIMEOUT_MS = 10_000

export type DialCallback = (error: NodeJS.ErrnoException | undefined, socket: net.Socket | undefined) => void

export class Backends {
  private readonly preferred = new Map<number, Loopback>()
  readonly sockets = new Set<net.Socket>()
  readonly agent: http.Agent

  constructor() {
    const dial = this.dial.bind(this)
    // the slow path's keep-alive pool dials through the same fallback
    class LoopbackAgent extends http.Agent {
      override createConnection(
        options: http.ClientRequestArgs,
        callback?: (error: Error | null, socket: stream.Duplex) => void
      ): undefined {
        dial(Number(options.port), (error, socket) => callback?.(error ?? null, socket as stream.Duplex))
        return undefined
      }
    }
    this.agent = new LoopbackAgent({ keepAlive: true, maxFreeSockets: 64, scheduling: "lifo" })
  }

  /**
   * Connects to `port` on loopback; the callback gets a connected socket (no-delay set) or the last error. With
   * `onread`, the socket reads into the caller's buffer and emits no 'data' (see net.connect).
   */
  dial(port: number, callback: DialCallback, onread?: net.OnReadOpts): void {
    const first = this.preferred.get(port) ?? "127.0.0.1"
    this.attempt(port, first, onread, (error, socket) => {
      if (error === undefined || !FALLBACK_CODES.has(error.code ?? "")) return callback(error, socket)
      const second: Loopback = first === "127.0.0.1" ? "::1" : "127.0.0.1"
      this.attempt(port, second, onread, (error2, socket2) => {
        if (error2 === undefined) {
          this.preferred.set(port, second)
          return callback(undefined, socket2)
        }
        // report the refusal rather than "no IPv6 here"
        callback(FALLBACK_CODES.has(error2.code ?? "") ? error : error2, undefined)
      })
    })
  }

  private attempt(port: number, host: Loopback, onread: net.OnReadOpts | undefined, callback: DialCallback): void {
    const socket = net.connect(
      onread === undefined ? { port, host, noDelay: true } : { port, host, noDelay: true, onread }
    )
    this.sockets.add(socket)
    socket.once("close", () => this.sockets.delete(socket))
    const timer = setTimeout(() => {
      const error: NodeJS.ErrnoException = new Error(`connecting to ${host} port ${port} timed out`)
      error.code = "ETIMEDOUT"
      socket.destroy(error)
    }, CONNECT_TIMEOUT_MS)
    const onError = (error: NodeJS.ErrnoException) => {
      clearTimeout(timer)
      socket.removeListener("connect", onConnect)
      socket.destroy()
      callback(error, undefined)
    }
    const onConnect = () => {
      clearTimeout(timer)
      socket.removeListener("error", onError)
      callback(undefined, socket)
    }
    socket.once("error", onError)
    socket.once("connect", onConnect)
  }

  destroy(): void {
    this.agent.destroy()
    for (const socket of this.sockets) socket.destroy()
    this.sockets.clear()
  }
}
