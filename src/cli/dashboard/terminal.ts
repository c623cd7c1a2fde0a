/**
 * The terminal the dashboard draws on: the alternate screen with the cursor hidden and stdin in raw mode, lines
 * written only where they changed since the last frame, everything redrawn after a resize — and the terminal put
 * back as it was however the dashboard ends (quit, a signal, a failure, or a crash: `restore` also runs on exit).
 */
import type { Size } from "./screen.js"

const ENTER = "\u001b[?1049h\u001b[?25l\u001b[2J"
const LEAVE = "\u001b[0m\u001b[?25h\u001b[?1049l"

export interface Terminal {
  readonly size: () => Size
  /** writes the lines that differ from the last frame */
  readonly draw: (lines: ReadonlyArray<string>) => void
  /** the next draw writes every line (after a resize, the terminal's content is not what was drawn) */
  readonly invalidate: () => void
  /** leaves the alternate screen, shows the cursor, ends raw mode; safe to call twice */
  readonly restore: () => void
}

export const openTerminal = (output: NodeJS.WriteStream, input: NodeJS.ReadStream): Terminal => {
  let previous: ReadonlyArray<string> = []
  let restored = false
  const restore = () => {
    if (restored) return
    restored = true
    process.removeListener("exit", restore)
    try {
      if (input.isTTY) input.setRawMode(false)
      input.pause()
    } catch {
      // stdin already closed: nothing to put back
    }
    output.write(LEAVE)
  }
  // a crash (an exception nothing caught) still gives the terminal back
  process.once("exit", restore)
  output.write(ENTER)
  if (input.isTTY) input.setRawMode(true)
  input.setEncoding("utf8")
  input.resume()
  return {
    size: () => ({ columns: output.columns ?? 80, rows: output.rows ?? 24 }),
    draw: (lines) => {
      if (restored) return
      let out = ""
      lines.forEach((line, i) => {
        if (previous[i] !== line) out += `\u001b[${i + 1};1H\u001b[0m${line}\u001b[K`
      })
      // a frame shorter than the last (the terminal shrank) leaves nothing of the old one below it
      if (lines.length < previous.length) out += `\u001b[${lines.length + 1};1H\u001b[J`
      previous = [...lines]
      if (out !== "") output.write(out)
    },
    invalidate: () => {
      previous = []
      if (!restored) output.write("\u001b[2J")
    },
    restore
  }
}
