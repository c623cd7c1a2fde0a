/**
 * The dashboard's screen as a pure function of the view model, the UI state, the terminal's size and whether colour
 * is wanted: exactly `rows` lines, none wider than `columns` (what is cut ends in `…`). The terminal side only writes
 * the lines that changed since the last frame.
 */
import {
  type DashboardModel,
  formatBytes,
  machineLine,
  type Row,
  rowsOf,
  type UsageView
} from "../../domain/dashboard.js"
import { stateStyle } from "../render.js"
import type { UiState } from "./state.js"

export interface Size {
  readonly columns: number
  readonly rows: number
}

/** A piece of a line and its SGR code (`"1"` bold, `"32"` green, …). */
interface Seg {
  readonly text: string
  readonly style?: string | undefined
}

/** Segments → one line of at most `width` columns; `fill` pads it to the width (a selected row's bar). */
const draw = (segs: ReadonlyArray<Seg>, width: number, colour: boolean, fill = false, base?: string): string => {
  let out = ""
  let used = 0
  for (const seg of segs) {
    if (used >= width) break
    // a value from a log or a reason must never move the cursor or change the terminal
    // biome-ignore lint/suspicious/noControlCharactersInRegex: replacing control characters is the point
    let text = seg.text.replace(/[\u0000-\u001f\u007f]/g, " ")
    if (used + text.length > width) text = `${text.slice(0, Math.max(0, width - used - 1))}…`
    used += text.length
    const style = [base, seg.style].filter((s) => s !== undefined).join(";")
    out += colour && style !== "" && text !== "" ? `\u001b[${style}m${text}\u001b[0m` : text
  }
  if (fill && colour && used < width) {
    const pad = " ".repeat(width - used)
    out += base === undefined ? pad : `\u001b[${base}m${pad}\u001b[0m`
  }
  return out
}

const padTo = (text: string, width: number) =>
  text.length >= width ? `${text.slice(0, width - 1)}… ` : text.padEnd(width + 1)

const usageText = (u: UsageView | undefined): string =>
  u === undefined
    ? ""
    : `${u.cpuPercent === null ? "  …" : `${u.cpuPercent.toFixed(1)}%`.padStart(6)}  ${formatBytes(u.rssBytes).padStart(9)}`

const KEYS: ReadonlyArray<readonly [string, string]> = [
  ["↑ ↓  j k", "select a world or a service (PgUp PgDn Home End)"],
  ["u", "bring the world up"],
  ["d", "bring the world down (files, ports and data stay)"],
  ["r", "reload the world (stop, start on the same ports)"],
  ["x", "remove the world: its worktree too (asks first)"],
  ["s", "restart the selected service and what depends on it"],
  ["l  Enter", "follow the selected service's log (q or Esc: back)"],
  ["o", "open the service (or the world's first url) in the browser"],
  ["/", "filter by project, world, state or service (Esc clears)"],
  ["?", "this help"],
  ["q  Ctrl-C", "quit"]
]

const HINTS = "↑↓ u:up d:down r:reload x:remove s:restart l:logs o:open /:filter ?:help q:quit"

/** The screen: `size.rows` lines. */
export const screen = (model: DashboardModel, ui: UiState, size: Size, colour: boolean): Array<string> => {
  const width = Math.max(20, size.columns)
  const height = Math.max(6, size.rows)
  const line = (segs: ReadonlyArray<Seg>, fill = false, base?: string) => draw(segs, width, colour, fill, base)
  const rows = rowsOf(model, ui.filter)
  const running = model.worlds.filter((w) => w.status.state === "running").length
  const top = line([
    { text: "berth dashboard", style: "1" },
    {
      text: ` · ${model.worlds.length} world${model.worlds.length === 1 ? "" : "s"}, ${running} running${model.line.length > 0 ? `, ${model.line.length} in line` : ""}`
    },
    ...(model.dashboard === null ? [] : [{ text: ` · ${model.dashboard}`, style: "36" }])
  ])
  const machine = line([{ text: model.ready ? machineLine(model.machine) : "waiting for the daemon…", style: "2" }])
  const bodyHeight = height - 5
  const body = bodyLines(model, ui, rows, width, bodyHeight, colour)
  const status = statusLine(model, ui)
  const bottom = bottomLine(ui, width)
  const out = [top, machine, line(body.header, false, "1"), ...body.lines]
  while (out.length < height - 2) out.push("")
  out.length = height - 2
  out.push(
    line([{ text: status.text, style: status.style }]),
    line([{ text: bottom, style: ui.mode._tag === "Confirm" || ui.mode._tag === "Filter" ? "1;33" : "2" }])
  )
  return out
}

const bodyLines = (
  model: DashboardModel,
  ui: UiState,
  rows: ReadonlyArray<Row>,
  width: number,
  height: number,
  colour: boolean
): { readonly header: ReadonlyArray<Seg>; readonly lines: Array<string> } => {
  const line = (segs: ReadonlyArray<Seg>, fill = false, base?: string) => draw(segs, width, colour, fill, base)
  const mode = ui.mode
  if (mode._tag === "Help") {
    return {
      header: [{ text: "keys" }],
      lines: KEYS.map(([key, what]) => line([{ text: `  ${key.padEnd(10)}`, style: "1" }, { text: what }])).concat(
        line([]),
        line([{ text: "  any key: back", style: "2" }])
      )
    }
  }
  if (mode._tag === "Logs") {
    const shown = ui.logs.slice(-height)
    return {
      header: [{ text: `log of ${mode.service} in ${mode.world}, following (q or Esc: back)` }],
      lines:
        shown.length === 0 ? [line([{ text: "  (nothing yet)", style: "2" }])] : shown.map((l) => line([{ text: l }]))
    }
  }
  if (!model.ready) return { header: [], lines: [] }
  if (rows.length === 0) {
    return {
      header: [],
      lines: [
        line([
          {
            text:
              model.worlds.length === 0
                ? "  no worlds yet: berth up <branch> makes one"
                : `  no world matches "${ui.filter}"`,
            style: "2"
          }
        ])
      ]
    }
  }
  const nameWidth = Math.min(
    28,
    Math.max(12, ...rows.map((r) => (r.service === undefined ? r.world.status.name.length : r.service.name.length + 2)))
  )
  const header: Array<Seg> = [{ text: `  ${padTo("WORLD", nameWidth)}${padTo("STATE", 10)}   CPU     MEMORY  WHERE` }]
  // each project's name above its worlds (not selectable); every other line is a row
  const display: Array<{ readonly text: string; readonly row: number | undefined }> = []
  let project: string | undefined
  rows.forEach((r, i) => {
    if (r.world.status.project !== project) {
      project = r.world.status.project
      display.push({ text: line([{ text: project, style: "1;4" }]), row: undefined })
    }
    const selected = i === ui.selected
    const marker = selected ? "▸ " : "  "
    const base = selected && colour ? "7" : undefined
    if (r.service === undefined) {
      const w = r.world.status
      const usage = model.usage.get(r.world.id)
      const where =
        w.queue !== undefined
          ? `#${w.queue.position} in line, waiting for ${w.queue.waitingFor}`
          : w.reason !== null
            ? w.reason
            : w.path
      display.push({
        text: line(
          [
            { text: marker + padTo(w.name, nameWidth), style: "1" },
            { text: padTo(w.state, 10), style: stateStyle(w.state) },
            { text: `${(usageText(usage) || "").padEnd(17)}  ` },
            { text: where, style: w.queue !== undefined ? "33" : w.reason !== null ? "31" : "2" }
          ],
          selected,
          base
        ),
        row: i
      })
    } else {
      const s = r.service
      const restarts = s.restarts > 0 ? `  ↻${s.restarts}` : ""
      display.push({
        text: line(
          [
            { text: `${marker}  ${padTo(s.name, nameWidth - 2)}` },
            { text: padTo(s.state, 10), style: stateStyle(s.state) },
            { text: `${s.port === null ? "" : `:${s.port}`}`.padEnd(8) },
            { text: s.url ?? "", style: "36" },
            { text: restarts, style: "33" },
            { text: s.reason === null ? "" : `  ${s.reason}`, style: "31" }
          ],
          selected,
          base
        ),
        row: i
      })
    }
  })
  // a page at a time, so the list stays still while the selection moves within it
  const at = Math.max(
    0,
    display.findIndex((d) => d.row === ui.selected)
  )
  const first = Math.floor(at / Math.max(1, height)) * Math.max(1, height)
  return { header, lines: display.slice(first, first + height).map((d) => d.text) }
}

const statusLine = (model: DashboardModel, ui: UiState): { readonly text: string; readonly style?: string } => {
  if (ui.message !== undefined) return { text: ui.message, style: "1" }
  if (ui.filter !== "" && ui.mode._tag !== "Filter") return { text: `filter: ${ui.filter} (Esc clears)`, style: "33" }
  if (model.line.length > 0) {
    return {
      text: `line: ${model.line.map((e) => `#${e.position} ${e.world} (waiting for ${e.waitingFor})`).join(", ")}`,
      style: "33"
    }
  }
  const last = model.events.at(-1)
  if (last === undefined) return { text: "" }
  const time = new Date(last.event.at).toTimeString().slice(0, 8)
  return {
    text: `${time} ${last.world}${last.event.service === null ? "" : ` ${last.event.service}`} ${last.event.kind}: ${last.event.message}`,
    style: "2"
  }
}

/**
 * The remove question in `width` columns, never cut before its `(y/N)`: what removing does, said shorter as room
 * runs out, and at last the world's name shortened in its middle.
 */
export const confirmPrompt = (world: string, width: number): string => {
  const answers = [
    "its processes stop, its ports are released, its worktree is deleted",
    "it stops, its ports go, its worktree is deleted",
    "its worktree is deleted",
    ""
  ]
  for (const what of answers) {
    const prompt = `remove ${world}? ${what === "" ? "" : `${what} `}(y/N)`
    if (prompt.length <= width) return prompt
  }
  const room = Math.max(2, width - "remove ? (y/N)".length)
  const head = Math.ceil((room - 1) / 2)
  return `remove ${world.slice(0, head)}…${world.slice(world.length - (room - 1 - head))}? (y/N)`
}

const bottomLine = (ui: UiState, width: number): string => {
  switch (ui.mode._tag) {
    case "Filter":
      return `filter: ${ui.mode.draft}▏ (Enter keeps it, Esc clears)`
    case "Confirm":
      return confirmPrompt(ui.mode.world, width)
    case "Logs":
      return "q or Esc: back to the worlds"
    case "Help":
      return "any key: back"
    case "List":
      return HINTS
  }
}

/** How many rows fit in the list (for page up and down). */
export const pageSize = (size: Size): number => Math.max(1, Math.max(6, size.rows) - 5)
