// Shared by the benchmark scripts: order statistics and the Markdown table they print.

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
