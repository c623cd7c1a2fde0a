/**
 * What `berth dashboard` does with a key, as a pure function: the UI state after it, and the action to run (bring a
 * world up, follow a service's log, quit, …). The command runs the actions; the screen is drawn from the state.
 */
import { type Row, reselect, rowKey } from "../../domain/dashboard.js"
import type { Key } from "./keys.js"

export type Mode =
  | { readonly _tag: "List" }
  | { readonly _tag: "Filter"; readonly draft: string }
  | { readonly _tag: "Confirm"; readonly worldId: number; readonly world: string }
  | { readonly _tag: "Help" }
  | { readonly _tag: "Logs"; readonly worldId: number; readonly world: string; readonly service: string }

export interface UiState {
  /** the selected row's index in the rows shown */
  readonly selected: number
  /** which row that is, so the selection follows it while worlds come and go */
  readonly selectedKey: string | undefined
  readonly filter: string
  readonly mode: Mode
  /** one line about the last action, or why a key did nothing */
  readonly message: string | undefined
  /** the followed log's lines, newest last */
  readonly logs: ReadonlyArray<string>
}

export const initialUi: UiState = {
  selected: 0,
  selectedKey: undefined,
  filter: "",
  mode: { _tag: "List" },
  message: undefined,
  logs: []
}

/** What a key asks the command to do. */
export type Action =
  | { readonly _tag: "Up" | "Down" | "Reload" | "Remove"; readonly row: Row }
  | { readonly _tag: "Restart" | "Logs" | "Open"; readonly row: Row; readonly service: string }
  | { readonly _tag: "StopLogs" }
  | { readonly _tag: "Quit" }

export interface Outcome {
  readonly ui: UiState
  readonly action?: Action | undefined
}

/** The selection kept on the same row after the rows changed (a world appeared, went, or the filter changed). */
export const follow = (ui: UiState, rows: ReadonlyArray<Row>): UiState => {
  const selected = reselect(rows, ui.selectedKey, ui.selected)
  const row = rows[selected]
  return { ...ui, selected, selectedKey: row === undefined ? undefined : rowKey(row) }
}

const move = (ui: UiState, rows: ReadonlyArray<Row>, by: number): UiState => {
  if (rows.length === 0) return ui
  const selected = Math.max(0, Math.min(rows.length - 1, ui.selected + by))
  return { ...ui, selected, selectedKey: rowKey(rows[selected]!), message: undefined }
}

/** The service a service action means: the selected one, else the world's first with a url (for open). */
const serviceOf = (row: Row, wantUrl: boolean): string | undefined =>
  row.service?.name ?? (wantUrl ? row.world.status.services.find((s) => s.url !== null)?.name : undefined)

const list = (ui: UiState, key: Key, rows: ReadonlyArray<Row>, page: number): Outcome => {
  const row = rows[ui.selected]
  if (key._tag === "ArrowUp") return { ui: move(ui, rows, -1) }
  if (key._tag === "ArrowDown") return { ui: move(ui, rows, 1) }
  if (key._tag === "PageUp") return { ui: move(ui, rows, -page) }
  if (key._tag === "PageDown") return { ui: move(ui, rows, page) }
  if (key._tag === "Home") return { ui: move(ui, rows, -rows.length) }
  if (key._tag === "End") return { ui: move(ui, rows, rows.length) }
  if (key._tag === "Interrupt") return { ui, action: { _tag: "Quit" } }
  if (key._tag === "Escape") return { ui: { ...ui, filter: "", message: undefined } }
  const char = key._tag === "Char" ? key.char : key._tag === "Enter" ? "\n" : ""
  switch (char) {
    case "k":
      return { ui: move(ui, rows, -1) }
    case "j":
      return { ui: move(ui, rows, 1) }
    case "q":
      return { ui, action: { _tag: "Quit" } }
    case "?":
      return { ui: { ...ui, mode: { _tag: "Help" } } }
    case "/":
      return { ui: { ...ui, mode: { _tag: "Filter", draft: ui.filter }, message: undefined } }
  }
  if (row === undefined) {
    return { ui: { ...ui, message: char === "" ? ui.message : "no world to act on: berth up <branch> makes one" } }
  }
  switch (char) {
    case "u":
      return { ui: { ...ui, message: undefined }, action: { _tag: "Up", row } }
    case "d":
      return { ui: { ...ui, message: undefined }, action: { _tag: "Down", row } }
    case "r":
      return { ui: { ...ui, message: undefined }, action: { _tag: "Reload", row } }
    case "x":
      return {
        ui: {
          ...ui,
          mode: { _tag: "Confirm", worldId: row.world.id, world: row.world.status.name },
          message: undefined
        }
      }
    case "s": {
      const service = serviceOf(row, false)
      return service === undefined
        ? { ui: { ...ui, message: "select a service (↓) to restart it" } }
        : { ui: { ...ui, message: undefined }, action: { _tag: "Restart", row, service } }
    }
    case "l":
    case "\n": {
      const service = serviceOf(row, false) ?? row.world.status.services[0]?.name
      if (service === undefined) return { ui: { ...ui, message: `${row.world.status.name} has no service` } }
      return {
        ui: {
          ...ui,
          mode: { _tag: "Logs", worldId: row.world.id, world: row.world.status.name, service },
          logs: [],
          message: undefined
        },
        action: { _tag: "Logs", row, service }
      }
    }
    case "o": {
      const service = serviceOf(row, true)
      const url = row.world.status.services.find((s) => s.name === service)?.url ?? null
      return service === undefined || url === null
        ? { ui: { ...ui, message: `${row.service?.name ?? row.world.status.name} has no url to open` } }
        : { ui: { ...ui, message: undefined }, action: { _tag: "Open", row, service } }
    }
  }
  return { ui }
}

/** The state after `key`, given the rows on screen (`page`: how many fit, for page up and down). */
export const press = (ui: UiState, key: Key, rows: ReadonlyArray<Row>, page: number): Outcome => {
  const mode = ui.mode
  switch (mode._tag) {
    case "List":
      return list(ui, key, rows, Math.max(1, page))
    case "Help":
      return key._tag === "Interrupt" ? { ui, action: { _tag: "Quit" } } : { ui: { ...ui, mode: { _tag: "List" } } }
    case "Confirm": {
      if (key._tag === "Interrupt") return { ui, action: { _tag: "Quit" } }
      const row = rows.find((r) => r.world.id === mode.worldId && r.service === undefined)
      if (key._tag === "Char" && (key.char === "y" || key.char === "Y") && row !== undefined) {
        return { ui: { ...ui, mode: { _tag: "List" } }, action: { _tag: "Remove", row } }
      }
      return { ui: { ...ui, mode: { _tag: "List" }, message: `kept ${mode.world}` } }
    }
    case "Filter": {
      if (key._tag === "Interrupt") return { ui, action: { _tag: "Quit" } }
      if (key._tag === "Enter") return { ui: { ...ui, mode: { _tag: "List" } } }
      if (key._tag === "Escape") return { ui: { ...ui, filter: "", mode: { _tag: "List" } } }
      const draft =
        key._tag === "Backspace" ? mode.draft.slice(0, -1) : key._tag === "Char" ? mode.draft + key.char : mode.draft
      return { ui: { ...ui, filter: draft, mode: { _tag: "Filter", draft } } }
    }
    case "Logs":
      if (key._tag === "Interrupt") return { ui, action: { _tag: "Quit" } }
      if (key._tag === "Escape" || (key._tag === "Char" && (key.char === "q" || key.char === "l"))) {
        return { ui: { ...ui, mode: { _tag: "List" }, logs: [] }, action: { _tag: "StopLogs" } }
      }
      return { ui }
  }
}

/** The most log lines kept while following: a screen's worth many times over. */
export const MAX_LOG_LINES = 1000

export const addLogLine = (ui: UiState, line: string): UiState => ({
  ...ui,
  logs: ui.logs.length >= MAX_LOG_LINES ? [...ui.logs.slice(1 - MAX_LOG_LINES), line] : [...ui.logs, line]
})
