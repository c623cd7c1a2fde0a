#!/usr/bin/env bash
# Two worlds of the shop example side by side: copies it into a scratch git repository, brings up the worlds one and
# two, places orders in one, and shows each world's state: only one's database, Redis DB and vhost saw them.
# Needs PostgreSQL, Redis and RabbitMQ (with its management plugin) on this machine; see README.md.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
repo=$(cd "$here/../.." && pwd)
berth() { "$repo/dist/berth" "$@"; }
# app.cjs and db.cjs are CommonJS: NODE_PATH lets them load pg, ioredis and amqplib from berth's own node_modules
export NODE_PATH="$repo/node_modules"

work=$(mktemp -d "${TMPDIR:-/tmp}/berth-shop.XXXXXX")/shop
mkdir -p "$work"
cp -R "$here/." "$work/"
rm -f "$work/demo.sh" "$work/README.md"
cd "$work"
git init -q -b main
git add -A
git -c user.name=berth -c user.email=berth@localhost commit -qm "shop"

berth up one
berth up two
echo
url_of() { berth env "$1" --json | node -e 'process.stdin.on("data", (d) => console.log(JSON.parse(d).APP_URL))'; }
one=$(url_of one)
two=$(url_of two)
for item in teapot kettle; do
  node -e 'fetch(process.argv[1], { method: "POST", body: JSON.stringify({ item: process.argv[2] }) })
    .then((r) => r.text()).then((t) => process.stdout.write(`POST one/orders -> ${t}`))' "$one/orders" "$item"
done
echo
for world in one two; do
  url=$(url_of "$world")
  printf '%s/state -> %s' "$url" "$(node -e 'fetch(process.argv[1]).then((r) => r.text()).then((t) => process.stdout.write(t))' "$url/state")"
  echo
done
echo
echo "both worlds keep running. See them with: $repo/dist/berth status"
echo "remove them and their slices with:        (cd $work && $repo/dist/berth remove one --force && $repo/dist/berth remove two --force)"
