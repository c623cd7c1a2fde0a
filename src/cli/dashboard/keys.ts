/**
 * Keys from a terminal in raw mode: the bytes one `data` event brings (one key, or several when typed fast or
 * pasted) → the keys they are. Only what the dashboard uses is named; any other escape sequence is dropped whole.
 */

export type Key =
  | { readonly _tag: "Char"; readonly char: string }
  | {
      readonly _tag:
        | "ArrowUp"
        | "ArrowDown"
        | "PageUp"
        | "PageDown"
        | "Home"
        | "End"
        | "Enter"
        | "Escape"
        | "Backspace"
        | "Interrupt"
    }

const named = (tag: Exclude<Key["_tag"], "Char">): Key => ({ _tag: tag })

/** CSI and SS3 sequences the dashboard knows, by their text after ESC. */
const SEQUENCES: ReadonlyArray<readonly [string, Key]> = [
  ["[A", named("ArrowUp")],
  ["[B", named("ArrowDown")],
  ["OA", named("ArrowUp")],
  ["OB", named("ArrowDown")],
  ["[5~", named("PageUp")],
  ["[6~", named("PageDown")],
  ["[H", named("Home")],
  ["[F", named("End")],
  ["OH", named("Home")],
  ["OF", named("End")],
  ["[1~", named("Home")],
  ["[4~", named("End")]
]

export const parseKeys = (input: string): Array<Key> => {
  const keys: Array<Key> = []
  let i = 0
  while (i < input.length) {
    const c = input[i]!
    if (c === "\u001b") {
      const rest = input.slice(i + 1)
      const known = SEQUENCES.find(([text]) => rest.startsWith(text))
      if (known !== undefined) {
        keys.push(known[1])
        i += 1 + known[0].length
        continue
      }
      // another CSI sequence (F-keys, mouse, …): skipped up to its final byte
      const csi = /^\[[0-9;?]*[ -/]*[@-~]/.exec(rest)
      if (csi !== null) {
        i += 1 + csi[0].length
        continue
      }
      keys.push(named("Escape"))
      i += 1
      continue
    }
    if (c === "\r" || c === "\n") keys.push(named("Enter"))
    else if (c === "\u007f" || c === "\b") keys.push(named("Backspace"))
    else if (c === "\u0003") keys.push(named("Interrupt"))
    else if (c >= " ") keys.push({ _tag: "Char", char: c })
    i += 1
  }
  return keys
}
