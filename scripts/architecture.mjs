// Writes the generated parts of ARCHITECTURE.md — the world's and the service's state diagrams (mermaid) and
// transition tables — from the transition data in src/domain/world-state.ts (`edges`) and src/domain/service-state.ts
// (`transition`, asked every case of `serviceEventCases` in every state), between the marker comments
// `<!-- generated:<name> … -->` and `<!-- /generated:<name> -->`.
// `npm run docs:architecture` writes them; `node scripts/architecture.mjs --check` only compares, and exits 1 while
// they differ (test/unit/architecture.test.ts runs it). The modules are bundled by esbuild first, so no TypeScript
// loader is needed.
import * as esbuild from "esbuild"
import { readFileSync, writeFileSync } from "node:fs"

const root = new URL("..", import.meta.url)
const file = new URL("ARCHITECTURE.md", root)
const command = "npm run docs:architecture"

const load = async (path) => {
  const built = await esbuild.build({
    entryPoints: [new URL(path, root).pathname],
    bundle: true,
    platform: "node",
    format: "esm",
    write: false,
    logLevel: "warning"
  })
  const text = built.outputFiles[0].text
  return import(`data:text/javascript;base64,${Buffer.from(text).toString("base64")}`)
}

const world = await load("src/domain/world-state.ts")
const service = await load("src/domain/service-state.ts")

// world: the edges as written
const worldEdges = Object.entries(world.edges).map(([event, edge]) => ({
  event,
  tag: event,
  from: [...edge.from],
  to: edge.to
}))

// service: every case asked in every state; one row per case and target (a payload may lead two places)
const serviceEdges = Object.entries(service.serviceEventCases).flatMap(([tag, cases]) =>
  cases.flatMap(([event, value]) => {
    const byTarget = new Map()
    for (const state of service.serviceStates) {
      const to = service.transition(state, value)
      if (to !== undefined) byTarget.set(to, [...(byTarget.get(to) ?? []), state])
    }
    return [...byTarget].map(([to, from]) => ({ event, tag, from, to }))
  })
)

/**
 * An event legal in many states is drawn as one arrow from a box that names them, rather than an arrow from each;
 * events legal in the same states share the box.
 */
const isWide = (edge) => edge.from.length >= 4

const boxLabel = (from, states) => {
  const missing = states.filter((state) => !from.includes(state))
  return missing.length <= 3 ? `any state but ${missing.join(", ")}` : from.join(", ")
}

/** The events on one arrow; every case of an event on it is named by the event alone. */
const arrowLabel = (edges, all) =>
  [...new Set(edges.map((edge) => edge.tag))]
    .flatMap((tag) => {
      const here = edges.filter((edge) => edge.tag === tag).map((edge) => edge.event)
      const cases = new Set(all.filter((edge) => edge.tag === tag).map((edge) => edge.event))
      return here.length === cases.size ? [tag] : here
    })
    .join(" / ")

const diagram = (states, edges) => {
  const lines = ["```mermaid", "stateDiagram-v2"]
  const boxes = new Map()
  const arrows = new Map()
  const add = (from, to, edge) => {
    const key = `${from} --> ${to}`
    arrows.set(key, [...(arrows.get(key) ?? []), edge])
  }
  for (const edge of edges) {
    if (isWide(edge)) {
      const key = edge.from.join(",")
      if (!boxes.has(key)) {
        const id = `from_${boxes.size + 1}`
        boxes.set(key, id)
        lines.push(`  state "${boxLabel(edge.from, states)}" as ${id}`)
      }
      add(boxes.get(key), edge.to, edge)
    } else {
      for (const from of edge.from) add(from, edge.to, edge)
    }
  }
  for (const [key, on] of arrows) lines.push(`  ${key}: ${arrowLabel(on, edges)}`)
  lines.push("```")
  return lines
}

const fromCell = (edge, states) => {
  const missing = states.filter((state) => !edge.from.includes(state))
  if (missing.length === 0) return "any"
  if (missing.length <= 2) return `any but ${missing.map((s) => `\`${s}\``).join(", ")}`
  return edge.from.map((s) => `\`${s}\``).join(", ")
}

const table = (states, edges) => [
  "| event | from | to |",
  "| --- | --- | --- |",
  ...edges.map((edge) => `| ${edge.event} | ${fromCell(edge, states)} | \`${edge.to}\` |`)
]

const ignored = "An event in a state its row does not list is ignored (`transition` answers `undefined`)."

const parts = {
  "world-states": [
    ...diagram(world.worldStates, worldEdges),
    "",
    `States, in lifecycle order: ${world.worldStates.map((s) => `\`${s}\``).join(", ")}. ${ignored}`,
    "",
    ...table(world.worldStates, worldEdges)
  ],
  "service-states": [
    ...diagram(service.serviceStates, serviceEdges),
    "",
    `States, in lifecycle order: ${service.serviceStates.map((s) => `\`${s}\``).join(", ")}. ${ignored}`,
    "",
    ...table(service.serviceStates, serviceEdges)
  ]
}

const sources = {
  "world-states": "src/domain/world-state.ts",
  "service-states": "src/domain/service-state.ts"
}

const current = readFileSync(file, "utf8")
let next = current
for (const [name, lines] of Object.entries(parts)) {
  const start = new RegExp(`<!-- generated:${name}[^>]*-->\\n`)
  const end = `<!-- /generated:${name} -->`
  const at = next.search(start)
  const until = next.indexOf(end)
  if (at < 0 || until < at) {
    console.error(`ARCHITECTURE.md has no <!-- generated:${name} --> … ${end} markers`)
    process.exit(1)
  }
  const head = `<!-- generated:${name} — written by ${command} from ${sources[name]}; do not edit by hand -->\n`
  next = `${next.slice(0, at)}${head}${lines.join("\n")}\n${next.slice(until)}`
}

if (process.argv.includes("--check")) {
  if (next !== current) {
    const a = current.split("\n")
    const b = next.split("\n")
    const line = a.findIndex((text, i) => text !== b[i])
    console.error(
      `ARCHITECTURE.md's generated state diagrams and tables differ from the code (line ${line + 1}): run ${command}`
    )
    process.exit(1)
  }
} else if (next !== current) {
  writeFileSync(file, next)
  console.log("ARCHITECTURE.md: state diagrams and tables written")
} else {
  console.log("ARCHITECTURE.md: state diagrams and tables already match the code")
}
