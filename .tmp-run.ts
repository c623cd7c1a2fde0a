import { readFileSync, existsSync, readdirSync } from "node:fs"
import { fromCompose } from "/work/main/src/domain/init/compose.ts"
const root = "/work/main/test/fixtures/compose"
for (const c of readdirSync(root).sort()) {
  const f = existsSync(`${root}/${c}/compose.yaml`) ? "compose.yaml" : "docker-compose.yml"
  const env = existsSync(`${root}/${c}/.env`) ? readFileSync(`${root}/${c}/.env`, "utf8") : undefined
  const r = fromCompose({ composeText: readFileSync(`${root}/${c}/${f}`, "utf8"), composeFile: f, envText: env, projectName: c })
  console.log("=====", c)
  if (r._tag === "Left") console.log(r.left)
  else { console.log(r.right.toml); console.log(r.right.notes.map((n) => " - " + n).join("\n")) }
}
