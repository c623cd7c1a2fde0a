// The process entry. Kept tiny: `--version` answers without evaluating Effect; everything else loads the CLI lazily.
declare const BERTH_VERSION: string

const argv = process.argv.slice(2)
if (argv.length === 1 && (argv[0] === "--version" || argv[0] === "-V")) {
  process.stdout.write(`${BERTH_VERSION}\n`)
} else {
  void import("./main.js").then((cli) => cli.run(argv))
}
