// Shared by the benchmark scripts: order statistics, the Markdown table they print, and the one-line summary each
// figure ends with.
import { availableParallelism, loadavg } from "node:os"
import { basename } from "node:path"

export const median = (values) => {
  const s = [...values].sort((a, b) => a - b)
  return (s[Math.floor((s.length - 1) / 2)] + s[Math.ceil((s.length - 1) / 2)]) / 2
}

/** nearest rank */
export const p90 = (values) => {
  const s = [...values].sort((a, b) => a - b)
  return s[Math.ceil(0.9 * s.length) - 1]
}

export const summarize = (name, samples, baseline) => ({
  command: name,
  medianMs: Number(median(samples).toFixed(1)),
  p90Ms: Number(p90(samples).toFixed(1)),
  ...(baseline === undefined ? {} : { ratio: Number((median(samples) / baseline).toFixed(2)) })
})

export const printTable = (results) => {
  console.log("| command | median ms | p90 ms | × node -e 0 |")
  console.log("| --- | ---: | ---: | ---: |")
  for (const r of results) {
    console.log(`| ${r.command} | ${r.medianMs} | ${r.p90Ms} | ${r.ratio === undefined ? "" : r.ratio.toFixed(2)} |`)
  }
}

/** The machine a figure is taken on: its cores, the 1-minute load average now, the day (UTC) and Node. */
export const machineNow = () => ({
  cores: availableParallelism(),
  load: Number(loadavg()[0].toFixed(2)),
  date: new Date().toISOString().slice(0, 10),
  node: process.version
})

/** An argument as a shell takes it back: one with a space quoted (after the `=` of `--option=value`). */
const shellWord = (arg) => {
  if (!/[\s"$`\\]/.test(arg)) return arg
  const [, option = "", value] = /^(--[\w-]+=)?([\s\S]*)$/.exec(arg)
  return `${option}"${value.replace(/["$`\\]/g, "\\$&")}"`
}

/** The command that ran this bench, as a user types it from the project's folder. */
export const commandLine = () =>
  ["node", `bench/${basename(process.argv[1])}`, ...process.argv.slice(2).map(shellWord)].join(" ")

const figure = (value, digits) => value.toFixed(digits)

/**
 * The one line a bench ends each figure with, in the form the docs quote: the median and range over the runs, the
 * machine (cores, load average before → after), the day and the command that gives it again.
 */
export const summaryLine = ({ what, values, unit, digits = 0, before, goal, command = commandLine() }) => {
  const after = machineNow()
  const sorted = [...values].sort((a, b) => a - b)
  const range = `${figure(sorted[0], digits)}–${figure(sorted.at(-1), digits)}`
  const spread = sorted.length === 1 ? "one reading" : `median of ${sorted.length}, range ${range} ${unit}`
  return (
    `${what}: ${figure(median(sorted), digits)} ${unit} (${spread})` +
    `${goal === undefined ? "" : `; ${goal}`} · ${after.cores} cores, load ${before.load} → ${after.load}, ` +
    `${after.date} · ${command}`
  )
}
