/**
 * Service names and url labels for a converted config: what another tool calls a service becomes a valid berth
 * service name (letters, digits, `-`, `_`, starting with a letter, none of berth's reserved words) and a host-name
 * label, each unique in the file.
 */
import { reservedServiceNames } from "../config/parse.js"

export const toName = (raw: string): string => {
  const name = raw
    .toLowerCase()
    .replace(/[^a-z0-9_-]/g, "-")
    .replace(/^[^a-z0-9]+|-+$/g, "")
  // Names must start with a letter; keep leading digits readable (`2fa` → `svc-2fa`).
  return name === "" ? "service" : /^[0-9]/.test(name) ? `svc-${name}` : name
}

/** url and groups are host-name labels: no `_`, at most 63 characters. */
export const toLabel = (raw: string): string => {
  const label = toName(raw).replace(/_/g, "-").replace(/-{2,}/g, "-").slice(0, 63).replace(/-+$/, "")
  return label === "" ? "service" : label
}

/** Each name as written → a berth service name, distinct from every other and from the reserved ones. */
export const assignNames = (written: ReadonlyArray<string>): ReadonlyMap<string, string> => {
  const taken = new Set<string>()
  const names = new Map<string, string>()
  for (const raw of written) {
    const base = reservedServiceNames.has(toName(raw)) ? `${toName(raw)}-svc` : toName(raw)
    let name = base
    for (let n = 2; taken.has(name); n += 1) name = `${base}-${n}`
    taken.add(name)
    names.set(raw, name)
  }
  return names
}

export const assignLabels = (names: ReadonlyArray<string>): ReadonlyMap<string, string> => {
  const taken = new Set<string>()
  const labels = new Map<string, string>()
  for (const name of names) {
    let label = toLabel(name)
    for (let n = 2; taken.has(label); n += 1) label = `${toLabel(name).slice(0, 60)}-${n}`
    taken.add(label)
    labels.set(name, label)
  }
  return labels
}
