#!/usr/bin/env bash
# Two worlds of the hello example side by side: copies it into a scratch git repository, brings up the worlds
# login-fix and checkout-v2, and shows that each web talks to its own api on its own ports.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
bin="$(cd "$here/../../dist" && pwd)/berth"
berth() { "$bin" "$@"; }

work=$(mktemp -d "${TMPDIR:-/tmp}/berth-hello.XXXXXX")/hello
mkdir -p "$work"
cp "$here/berth.toml" "$here/api.mjs" "$here/web.mjs" "$work/"
cd "$work"
git init -q -b main
git add -A
git -c user.name=berth -c user.email=berth@localhost commit -qm "hello"

# --yes: this example's berth.toml may run its commands (berth asks before it runs a repository's for the first time)
berth up login-fix --yes
berth up checkout-v2 --yes
echo
for world in login-fix checkout-v2; do
  # `env --json` is { "schema": 1, "world", "vars": { "WEB_URL": … } }: read all of it, and fail rather than print nothing
  url=$(berth env "$world" --json | node -e '
    let text = ""
    process.stdin.on("data", (d) => (text += d)).on("end", () => {
      const url = JSON.parse(text).vars?.WEB_URL
      if (typeof url !== "string") throw new Error(`berth env --json gave no WEB_URL: ${text}`)
      console.log(url)
    })')
  # through the proxy, as a browser would (berth curl needs no name resolution for *.localhost)
  printf '%s -> %s\n' "$url" "$(berth curl "$world" web)"
done
echo
echo "both worlds keep running. See them with: $bin status"
echo "stop them with:                           (cd $work && $bin down --all)"
