/**
 * `berth curl <world> <service> [path]`: one request to a service the way a browser reaches it — through the
 * machine-wide proxy with the route's Host (and, over HTTPS, verified against berth's CA) — without needing the host
 * name to resolve. A service the proxy does not route is called on its port directly.
 */
import { readFileSync } from "node:fs"
import * as http from "node:http"
import * as https from "node:https"
import * as Args from "@effect/cli/Args"
import * as Command from "@effect/cli/Command"
import * as Options from "@effect/cli/Options"
import * as Effect from "effect/Effect"
import * as Option from "effect/Option"
import { DaemonClient } from "../../daemon/client.js"
import { InvalidRequest, NoServiceUrl } from "../../domain/errors.js"
import { printDocument } from "../json.js"
import { json } from "../output.js"
import { viaDaemon, withDaemon } from "./worlds.js"

interface Answer {
  readonly status: number
  readonly head: string
  readonly headers: Readonly<Record<string, string | ReadonlyArray<string>>>
  /** the body, when it was collected (--json) rather than streamed */
  readonly body: string | undefined
}

/** berth's CA, which an https route's certificate is verified against; nothing for plain http. */
export const caFor = (target: URL, caPath: string): Effect.Effect<string | undefined, InvalidRequest> =>
  target.protocol === "https:"
    ? Effect.try({
        try: () => readFileSync(caPath, "utf8"),
        catch: () => new InvalidRequest({ reason: `cannot read berth's CA at ${caPath}` })
      })
    : Effect.succeed(undefined)

/** Sends the request and streams the body to stdout (or collects it); resolves once the body has been read. */
export const send = (
  url: URL,
  options: {
    readonly method: string
    readonly headers: Readonly<Record<string, string>>
    readonly body: Buffer | undefined
    readonly include: boolean
    readonly ca: string | undefined
    /** collect the body instead of streaming it to stdout */
    readonly collect: boolean
  }
) =>
  Effect.async<Answer, InvalidRequest>((resume) => {
    const secure = url.protocol === "https:"
    const port = Number(url.port || (secure ? 443 : 80))
    const request = (secure ? https : http).request(
      {
        // the route's host need not resolve here: the proxy listens on loopback and reads the Host header
        host: "127.0.0.1",
        port,
        method: options.method,
        path: `${url.pathname}${url.search}`,
        headers: { host: url.host, ...options.headers },
        ...(secure ? { servername: url.hostname, ...(options.ca === undefined ? {} : { ca: options.ca }) } : {})
      },
      (response) => {
        const head = [
          `HTTP/${response.httpVersion} ${response.statusCode ?? 0} ${response.statusMessage ?? ""}`.trimEnd(),
          ...Object.entries(response.headers).flatMap(([k, v]) =>
            Array.isArray(v) ? v.map((x) => `${k}: ${x}`) : v === undefined ? [] : [`${k}: ${v}`]
          ),
          "",
          ""
        ].join("\r\n")
        const headers = Object.fromEntries(
          Object.entries(response.headers).flatMap(([k, v]) => (v === undefined ? [] : [[k, v] as const]))
        )
        const chunks: Array<Buffer> = []
        if (options.collect) response.on("data", (chunk: Buffer) => chunks.push(chunk))
        else {
          if (options.include) process.stdout.write(head)
          response.pipe(process.stdout, { end: false })
        }
        response.once("end", () =>
          resume(
            Effect.succeed({
              status: response.statusCode ?? 0,
              head,
              headers,
              body: options.collect ? Buffer.concat(chunks).toString("utf8") : undefined
            })
          )
        )
        response.once("error", (e) =>
          resume(Effect.fail(new InvalidRequest({ reason: `reading the answer: ${e.message}` })))
        )
      }
    )
    request.once("error", (e: NodeJS.ErrnoException) =>
      resume(
        Effect.fail(
          new InvalidRequest({
            reason:
              e.code === "ECONNREFUSED"
                ? `nothing listens on 127.0.0.1:${port} (${url.origin}): is the proxy on? see \`berth port\``
                : `${url.origin}: ${e.message}`
          })
        )
      )
    )
    if (options.body !== undefined) request.end(options.body)
    else request.end()
  })

const parseHeader = (line: string): Effect.Effect<readonly [string, string], InvalidRequest> => {
  const colon = line.indexOf(":")
  return colon <= 0
    ? Effect.fail(new InvalidRequest({ reason: `-H ${JSON.stringify(line)}: expected "Name: value"` }))
    : Effect.succeed([line.slice(0, colon).trim().toLowerCase(), line.slice(colon + 1).trim()] as const)
}

export const curl = Command.make(
  "curl",
  {
    world: Args.text({ name: "world" }).pipe(Args.withDescription("the world (a branch name)")),
    service: Args.text({ name: "service" }).pipe(Args.withDescription("a service with a url or a port")),
    path: Args.text({ name: "path" }).pipe(Args.withDescription("the path, default /"), Args.optional),
    method: Options.text("request").pipe(
      Options.withAlias("X"),
      Options.withDescription("the method (default GET, or POST with -d)"),
      Options.optional
    ),
    data: Options.text("data").pipe(
      Options.withAlias("d"),
      Options.withDescription("the request body; @file reads it from a file"),
      Options.optional
    ),
    headers: Options.text("header").pipe(
      Options.withAlias("H"),
      Options.withDescription('a request header, "Name: value" (repeatable)'),
      Options.repeated
    ),
    include: Options.boolean("include").pipe(Options.withAlias("i"), Options.withDescription("print the headers too")),
    fail: Options.boolean("fail").pipe(
      Options.withAlias("f"),
      Options.withDescription("exit 1 when the status is 400 or more")
    ),
    json
  },
  ({ data, fail, headers, include, json, method, path, service, world }) =>
    viaDaemon(
      Effect.gen(function* () {
        const client = yield* DaemonClient
        const { worlds } = yield* client.Status({ cwd: process.cwd() })
        const w = worlds.find((x) => x.name === world || x.slug === world)
        if (w === undefined) {
          return yield* new InvalidRequest({
            reason: `no world ${JSON.stringify(world)} in this project; worlds: ${worlds.map((x) => x.name).join(", ") || "none"}`
          })
        }
        const s = w.services.find((x) => x.name === service)
        if (s === undefined || s.kind !== "process" || s.url === null) {
          const reachable = w.services.filter((x) => x.kind === "process" && x.url !== null).map((x) => x.name)
          return yield* new NoServiceUrl({ world: w.name, service, reachable })
        }
        const target = new URL(
          Option.getOrElse(path, () => "/"),
          s.url
        )
        const parsed = yield* Effect.forEach(headers, parseHeader)
        const body = yield* Option.match(data, {
          onNone: () => Effect.succeed(Option.none<Buffer>()),
          onSome: (d) =>
            d.startsWith("@")
              ? Effect.try({
                  try: () => Option.some(readFileSync(d.slice(1))),
                  catch: (e) =>
                    new InvalidRequest({
                      reason: `-d ${d}: cannot read ${d.slice(1)} (${(e as NodeJS.ErrnoException).code ?? String(e)})`
                    })
                })
              : Effect.succeed(Option.some(Buffer.from(d)))
        })
        const ca = yield* caFor(target, (yield* client.GetSettings()).proxy.caPath)
        const answer = yield* send(target, {
          method: Option.getOrElse(method, () => (Option.isSome(body) ? "POST" : "GET")),
          headers: Object.fromEntries(parsed),
          body: Option.getOrUndefined(body),
          include,
          ca,
          collect: json
        })
        if (json)
          yield* printDocument("curl", {
            url: target.href,
            status: answer.status,
            headers: answer.headers,
            body: answer.body ?? null
          })
        if (fail && answer.status >= 400) {
          process.exitCode = 1
          process.stderr.write(`berth curl: ${target.href} answered ${answer.status}\n`)
        }
      })
    )
).pipe(Command.withDescription("Call a service of a world through the proxy, as a browser would"), withDaemon)
