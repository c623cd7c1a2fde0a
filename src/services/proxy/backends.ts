/**
 * Connections to backends. Dev servers listen on 127.0.0.1, on ::1, or on both, and `localhost` resolves to only
 * one of them on many machines, so the proxy dials 127.0.0.1 and falls back to ::1 when refused (or the other way
 * round), remembering per port which one answered. Every socket is tracked so the proxy can close them all.
 *
 * Peers' proxies (worlds another machine runs) are dialled at the address the daemon gave, never anything else,
 * with a short connect limit so a machine that is gone is answered 503 at once rather than after the usual wait.
 * While connections to a peer are open, the peer is probed (a fresh connection) every few seconds: a request in
 * flight to a machine that dropped off the network would otherwise wait for TCP to give up — many minutes — so when
 * a probe fails every connection to that peer is closed, and its clients get their 503 at once.
 */
import * as http from "node:http"
import * as net from "node:net"
import type * as stream from "node:stream"

type Loopback = "127.0.0.1" | "::1"

const FALLBACK_CODES = new Set(["ECONNREFUSED", "EADDRNOTAVAIL", "EAFNOSUPPORT", "ENETUNREACH", "EHOSTUNREACH"])
const CONNECT_TIMEOUT_MS = 10_000
/** A peer's proxy that takes longer than this to accept is taken as unreachable. */
export const REMOTE_CONNECT_TIMEOUT_MS = 2_000
/** Probes on idle peer connections, so that one to a machine that vanished does not stay open for ever. */
const REMOTE_KEEPALIVE_MS = 10_000
/** How often a peer with open connections is probed. */
export const REMOTE_PROBE_MS = 5_000

interface Peer {
  readonly sockets: Set<net.Socket>
  readonly timer: NodeJS.Timeout
  probing: boolean
}

export type DialCallback = (error: NodeJS.ErrnoException | undefined, socket: net.Socket | undefined) => void

export class Backends {
  private readonly preferred = new Map<number, Loopback>()
  readonly sockets = new Set<net.Socket>()
  readonly agent: http.Agent
  /** The slow path's pool of connections to peers' proxies (keyed by their address and port). */
  readonly remoteAgent: http.Agent
  /**
   * The address dials to peers leave from: this machine's cluster address when it has one, so peers see the address
   * they list (a machine with several interfaces would otherwise pick one by route).
   */
  source: string | undefined = undefined
  private readonly connectTimeoutMs: number
  private readonly probeMs: number
  /** peers with open connections, by address and port */
  private readonly peers = new Map<string, Peer>()

  constructor(options: { readonly remoteConnectTimeoutMs?: number; readonly remoteProbeMs?: number } = {}) {
    this.connectTimeoutMs = options.remoteConnectTimeoutMs ?? REMOTE_CONNECT_TIMEOUT_MS
    this.probeMs = options.remoteProbeMs ?? REMOTE_PROBE_MS
    const dial = this.dial.bind(this)
    const dialRemote = this.dialRemote.bind(this)
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
    class RemoteAgent extends http.Agent {
      override createConnection(
        options: http.ClientRequestArgs,
        callback?: (error: Error | null, socket: stream.Duplex) => void
      ): undefined {
        dialRemote(String(options.host), Number(options.port), (error, socket) =>
          callback?.(error ?? null, socket as stream.Duplex)
        )
        return undefined
      }
    }
    this.remoteAgent = new RemoteAgent({ keepAlive: true, maxFreeSockets: 16, scheduling: "lifo" })
  }

  /** Connects to a peer's proxy at `address`:`port` (the caller's route said so); fails after the connect limit. */
  dialRemote(address: string, port: number, callback: DialCallback, onread?: net.OnReadOpts): void {
    this.connect(this.remoteTo(address, port), onread, this.connectTimeoutMs, (error, socket) => {
      if (socket !== undefined) {
        socket.setKeepAlive(true, REMOTE_KEEPALIVE_MS)
        this.watch(address, port, socket)
      }
      callback(error, socket)
    })
  }

  private remoteTo(address: string, port: number) {
    const source = this.source
    // only from an address of the same family; otherwise the kernel chooses
    const localAddress = source !== undefined && net.isIP(source) === net.isIP(address) ? source : undefined
    return { port, host: address, localAddress }
  }

  /** Counts `socket` among its peer's open connections; the peer is probed while it has any. */
  private watch(address: string, port: number, socket: net.Socket): void {
    const key = `${address}|${port}`
    let peer = this.peers.get(key)
    if (peer === undefined) {
      const timer = setInterval(() => this.probe(key, address, port), this.probeMs)
      timer.unref()
      peer = { sockets: new Set(), timer, probing: false }
      this.peers.set(key, peer)
    }
    const mine = peer
    mine.sockets.add(socket)
    socket.once("close", () => {
      mine.sockets.delete(socket)
      if (mine.sockets.size === 0 && this.peers.get(key) === mine) {
        clearInterval(mine.timer)
        this.peers.delete(key)
      }
    })
  }

  private probe(key: string, address: string, port: number): void {
    const peer = this.peers.get(key)
    if (peer === undefined || peer.probing) return
    peer.probing = true
    this.connect(this.remoteTo(address, port), undefined, this.connectTimeoutMs, (error, socket) => {
      peer.probing = false
      socket?.destroy()
      // refused or timed out: nothing sent on the open connections will be answered
      if (error !== undefined) for (const open of peer.sockets) open.destroy()
    })
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
    this.connect({ port, host, localAddress: undefined }, onread, CONNECT_TIMEOUT_MS, callback)
  }

  private connect(
    to: { readonly port: number; readonly host: string; readonly localAddress: string | undefined },
    onread: net.OnReadOpts | undefined,
    timeoutMs: number,
    callback: DialCallback
  ): void {
    const { port, host, localAddress } = to
    const options: net.TcpNetConnectOpts = { port, host, noDelay: true }
    if (localAddress !== undefined) options.localAddress = localAddress
    if (onread !== undefined) options.onread = onread
    const socket = net.connect(options)
    this.sockets.add(socket)
    socket.once("close", () => this.sockets.delete(socket))
    const timer = setTimeout(() => {
      const error: NodeJS.ErrnoException = new Error(`connecting to ${host} port ${port} timed out`)
      error.code = "ETIMEDOUT"
      socket.destroy(error)
    }, timeoutMs)
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
    this.remoteAgent.destroy()
    for (const peer of this.peers.values()) clearInterval(peer.timer)
    this.peers.clear()
    for (const socket of this.sockets) socket.destroy()
    this.sockets.clear()
  }
}
