import { describe, expect, it } from "@effect/vitest"
import { parseKeys } from "../../src/cli/dashboard/keys.js"
import { pageSize, screen } from "../../src/cli/dashboard/screen.js"
import { addLogLine, follow, initialUi, MAX_LOG_LINES, press, type UiState } from "../../src/cli/dashboard/state.js"
import { applyMessage, emptyModel, rowsOf, type WatchedWorldView } from "../../src/domain/dashboard.js"

const world = (id: number, name: string, state = "running", project = "app"): WatchedWorldView => ({
  id,
  mainRoot: "/repo",
  selection: { services: ["web"], groups: [] },
  status: {
    project,
    name,
    path: `/repo.worktrees/${name}`,
    main: false,
    desired: "up",
    state,
    reason: null,
    services: [
      {
        name: "web",
        kind: "process",
        state: state === "running" ? "healthy" : "stopped",
        pid: 100 + id,
        port: 4000 + id,
        url: `http://web.${name}.${project}.localhost:7355`,
        restarts: id === 2 ? 3 : 0,
        reason: null
      },
      { name: "db", kind: "slice", state: "ready", pid: null, port: null, url: null, restarts: 0, reason: null }
    ],
    events: []
  }
})

const machine = {
  memTotalBytes: 8 * 1024 ** 3,
  memAvailableBytes: 4 * 1024 ** 3,
  memAvailablePercent: 50,
  disks: [{ path: "/home", freeBytes: 20 * 1024 ** 3 }],
  running: 2,
  reserves: { maxParallel: 20, ramPercent: 10, diskBytes: 2 * 1024 ** 3, resumeFactor: 1.5, recovering: false }
}

const model = applyMessage(emptyModel(), {
  _tag: "Snapshot",
  worlds: [world(1, "login-fix"), world(2, "checkout-v2"), world(3, "old", "stopped", "other")],
  line: [],
  machine,
  usage: [{ worldId: 1, cpuPercent: 12.5, rssBytes: 300 * 1024 ** 2, processes: 4 }],
  dashboard: "http://berth.localhost:7355/",
  at: 0
})

// biome-ignore lint/suspicious/noControlCharactersInRegex: stripping the escapes is the point
const plain = (line: string) => line.replace(/\u001b\[[0-9;]*m/g, "")

describe("keys from a raw terminal", () => {
  it("reads arrows (CSI and SS3), pages, Enter, Escape, Backspace, Ctrl-C and characters, several at once", () => {
    expect(
      parseKeys("\u001b[A\u001bOBjq\r\u001b\u007f\u0003\u001b[5~\u001b[6~").map((k) =>
        k._tag === "Char" ? k.char : k._tag
      )
    ).toEqual(["ArrowUp", "ArrowDown", "j", "q", "Enter", "Escape", "Backspace", "Interrupt", "PageUp", "PageDown"])
    // an unknown sequence (F5) is dropped whole, not typed as characters
    expect(parseKeys("\u001b[15~x")).toEqual([{ _tag: "Char", char: "x" }])
  })
})

describe("the dashboard's keys", () => {
  const rows = rowsOf(model, "")
  const keys = (ui: UiState, text: string) => {
    let state = ui
    const actions: Array<string> = []
    for (const key of parseKeys(text)) {
      const out = press(state, key, rowsOf(model, state.filter), 10)
      state = follow(out.ui, rowsOf(model, out.ui.filter))
      if (out.action !== undefined) {
        const a = out.action
        actions.push(
          a._tag === "Quit" || a._tag === "StopLogs"
            ? a._tag
            : `${a._tag} ${a.row.world.status.name}${"service" in a ? ` ${a.service}` : ""}`
        )
      }
    }
    return { state, actions }
  }

  it("moves the selection and acts on the selected world or service", () => {
    // rows: app/checkout-v2, its web, its db, app/login-fix, web, db, other/old, web, db
    expect(rows).toHaveLength(9)
    expect(keys(initialUi, "u").actions).toEqual(["Up checkout-v2"])
    expect(keys(initialUi, "\u001b[B\u001b[B\u001b[Bd").actions).toEqual(["Down login-fix"])
    expect(keys(initialUi, "jr").actions).toEqual(["Reload checkout-v2"])
    expect(keys(initialUi, "js").actions).toEqual(["Restart checkout-v2 web"])
    // restart needs a service; open takes the world's first with a url
    expect(keys(initialUi, "s").state.message).toContain("select a service")
    expect(keys(initialUi, "o").actions).toEqual(["Open checkout-v2 web"])
    expect(keys(initialUi, "jjo").state.message).toBe("db has no url to open")
    expect(keys(initialUi, "q").actions).toEqual(["Quit"])
    expect(keys(initialUi, "\u0003").actions).toEqual(["Quit"])
    // never past either end
    expect(keys(initialUi, "kkk").state.selected).toBe(0)
    expect(keys(initialUi, "\u001b[6~\u001b[6~").state.selected).toBe(8)
  })

  it("asks before removing: y removes, anything else keeps", () => {
    const asked = keys(initialUi, "x")
    expect(asked.state.mode).toEqual({ _tag: "Confirm", worldId: 2, world: "checkout-v2" })
    expect(keys(asked.state, "y").actions).toEqual(["Remove checkout-v2"])
    const kept = keys(asked.state, "n")
    expect(kept.actions).toEqual([])
    expect(kept.state.message).toBe("kept checkout-v2")
  })

  it("filters as the user types; Enter keeps the filter, Esc clears it; the selection stays on its row", () => {
    const typing = keys(initialUi, "/logi")
    expect(typing.state.mode).toEqual({ _tag: "Filter", draft: "logi" })
    expect(rowsOf(model, typing.state.filter).map((r) => r.world.status.name)).toEqual([
      "login-fix",
      "login-fix",
      "login-fix"
    ])
    const kept = keys(typing.state, "n\r")
    expect(kept.state.filter).toBe("login")
    expect(kept.state.mode._tag).toBe("List")
    expect(keys(kept.state, "d").actions).toEqual(["Down login-fix"])
    expect(keys(kept.state, "\u001b").state.filter).toBe("")
    expect(keys(initialUi, "/x\u007f\u001b").state.filter).toBe("")
  })

  it("follows a service's log and goes back; shows help until a key", () => {
    const following = keys(initialUi, "jl")
    expect(following.actions).toEqual(["Logs checkout-v2 web"])
    expect(following.state.mode._tag).toBe("Logs")
    expect(keys(following.state, "q").actions).toEqual(["StopLogs"])
    expect(keys(following.state, "q").state.mode._tag).toBe("List")
    const help = keys(initialUi, "?")
    expect(help.state.mode._tag).toBe("Help")
    expect(keys(help.state, "u").actions).toEqual([])
    expect(keys(help.state, "u").state.mode._tag).toBe("List")
    let ui = initialUi
    for (let i = 0; i < MAX_LOG_LINES + 5; i++) ui = addLogLine(ui, `line ${i}`)
    expect(ui.logs).toHaveLength(MAX_LOG_LINES)
    expect(ui.logs.at(-1)).toBe(`line ${MAX_LOG_LINES + 4}`)
  })
})

describe("the dashboard's screen", () => {
  it("fills 80×24 exactly: worlds by project, services with port and url, CPU and memory, the reserves, the keys", () => {
    const lines = screen(model, initialUi, { columns: 80, rows: 24 }, false)
    expect(lines).toHaveLength(24)
    for (const line of lines) expect(line.length).toBeLessThanOrEqual(80)
    const text = lines.join("\n")
    expect(lines[0]).toBe("berth dashboard · 3 worlds, 2 running · http://berth.localhost:7355/")
    expect(lines[1]).toContain("2/20 running · memory 50% free (reserve 10%)")
    expect(text).toMatch(/^▸ checkout-v2 +running/m)
    expect(text).toMatch(/^ {4}web +healthy +:4002 +http:\/\/web\.checkout-v2\.app\.localhost:7355 +↻3$/m)
    expect(text).toMatch(/^ {2}login-fix +running +12\.5% +300 MiB/m)
    expect(text).toMatch(/^other$/m)
    expect(text).toMatch(/^ {2}old +stopped/m)
    expect(lines[23]).toContain("q:quit")
    // no escapes without colour
    expect(text).not.toContain("\u001b")
  })

  it("shows a world's place in line and what it waits for, and the line under the list", () => {
    const waiting = world(4, "queued-one", "queued")
    const queued = applyMessage(
      applyMessage(model, {
        _tag: "WorldChanged",
        world: {
          ...waiting,
          status: { ...waiting.status, queue: { position: 2, waitingFor: "memory (8% free, needs 10%)" } }
        }
      }),
      {
        _tag: "LineChanged",
        line: [
          { worldId: 4, project: "app", world: "queued-one", position: 2, waitingFor: "memory (8% free, needs 10%)" }
        ]
      }
    )
    const lines = screen(queued, initialUi, { columns: 120, rows: 24 }, false)
    expect(lines.join("\n")).toMatch(/^ {2}queued-one +queued +#2 in line, waiting for memory \(8% free, needs 10%\)$/m)
    expect(lines[22]).toBe("line: #2 queued-one (waiting for memory (8% free, needs 10%))")
    expect(lines[0]).toContain("1 in line")
  })

  it("colours states and marks the selection on a terminal that wants colour; cuts long lines with …", () => {
    const lines = screen(model, initialUi, { columns: 40, rows: 12 }, true)
    expect(lines).toHaveLength(12)
    for (const line of lines) expect(plain(line).length).toBeLessThanOrEqual(40)
    expect(lines.join("\n")).toContain("\u001b[32m")
    expect(plain(lines[0]!)).toMatch(/…$/)
  })

  it("scrolls a page at a time to keep the selection in view, and shows the prompt of each mode", () => {
    const small = { columns: 80, rows: 8 }
    expect(pageSize(small)).toBe(3)
    const last: UiState = { ...initialUi, selected: 8 }
    const lines = screen(model, last, small, false)
    expect(lines.join("\n")).toMatch(/^▸ {3}db/m)
    expect(
      screen(
        model,
        { ...initialUi, mode: { _tag: "Confirm", worldId: 1, world: "login-fix" } },
        { columns: 100, rows: 24 },
        false
      )[23]
    ).toContain("remove login-fix?")
    const logs = screen(
      model,
      {
        ...initialUi,
        mode: { _tag: "Logs", worldId: 1, world: "login-fix", service: "web" },
        logs: ["hello", "world"]
      },
      { columns: 80, rows: 24 },
      false
    )
    expect(logs[2]).toBe("log of web in login-fix, following (q or Esc: back)")
    expect(logs.slice(3, 5)).toEqual(["hello", "world"])
    expect(
      screen(model, { ...initialUi, mode: { _tag: "Help" } }, { columns: 80, rows: 24 }, false).join("\n")
    ).toContain("x         remove the world")
    expect(screen(emptyModel(), initialUi, { columns: 80, rows: 24 }, false)[1]).toBe("waiting for the daemon…")
  })

  it("shows the whole remove question, ending in (y/N), at 80 columns (and narrower), whatever the world's name", () => {
    const long = "feature/a-branch-name-long-enough-to-fill-most-of-a-terminal-line-by-itself"
    for (const columns of [80, 60, 40, 20]) {
      for (const world of ["login-fix", "checkout-v2", long]) {
        const lines = screen(
          model,
          { ...initialUi, mode: { _tag: "Confirm", worldId: 1, world } },
          { columns, rows: 24 },
          false
        )
        const prompt = lines[23]!
        expect(prompt.length, prompt).toBeLessThanOrEqual(columns)
        expect(prompt, `${columns} columns`).toMatch(/^remove .+\? .*\(y\/N\)$/)
        // the name itself whenever it fits beside the question
        if (`remove ${world}? (y/N)`.length <= columns) expect(prompt).toContain(`remove ${world}?`)
      }
    }
    // at 80 columns a usual name keeps what removing does
    expect(
      screen(
        model,
        { ...initialUi, mode: { _tag: "Confirm", worldId: 1, world: "login-fix" } },
        { columns: 80, rows: 24 },
        false
      )[23]
    ).toMatch(/^remove login-fix\? .*worktree.* \(y\/N\)$/)
  })
})
