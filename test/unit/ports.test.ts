import { describe, expect, it } from "@effect/vitest"
import * as Either from "effect/Either"
import * as FastCheck from "effect/FastCheck"
import { fnv1a32 } from "../../src/domain/hash.js"
import type { PortRange, RangeExhausted } from "../../src/domain/ports.js"
import {
  blockedPorts,
  candidatePorts,
  defaultPortRange,
  parsePortRange,
  planPorts,
  portKey,
  preferredPort,
  rangeSize,
  usablePorts
} from "../../src/domain/ports.js"

const RUNS = { numRuns: 300 }

const none: ReadonlySet<number> = new Set()
const noLeases: ReadonlyMap<string, number> = new Map()

const planned = (result: Either.Either<ReadonlyMap<string, number>, RangeExhausted>): ReadonlyMap<string, number> =>
  Either.getOrThrowWith(result, (e) => new Error(`unexpected ${JSON.stringify(e)}`))

describe("blockedPorts", () => {
  it("holds the browsers' unsafe ports, some of which sit inside the default range", () => {
    for (const port of [1, 22, 25, 53, 554, 1719, 2049, 4045, 4190, 5060, 5061, 6000, 6566, 6667, 6679, 6697, 10080]) {
      expect(blockedPorts.has(port), String(port)).toBe(true)
    }
    for (const port of [80, 443, 3000, 4000, 5173, 5999, 8080]) expect(blockedPorts.has(port), String(port)).toBe(false)
    expect([...blockedPorts].filter((p) => p >= 4000 && p <= 5999).sort()).toEqual([4045, 4190, 5060, 5061])
    expect(usablePorts(defaultPortRange)).toBe(1996)
  })
})

describe("parsePortRange", () => {
  it.each([
    ["4000-5999", { from: 4000, to: 5999 }],
    [" 1024 - 65535 ", { from: 1024, to: 65_535 }],
    ["04000-05999", { from: 4000, to: 5999 }],
    ["6665-6670", { from: 6665, to: 6670 }]
  ] as const)("%j → %j", (text, range) => {
    expect(parsePortRange(text)).toEqual(Either.right(range))
  })

  it.each([
    ["", "expected FROM-TO"],
    ["4000", "expected FROM-TO"],
    ["4000:5999", "expected FROM-TO"],
    ["-1-5", "expected FROM-TO"],
    ["4000.5-5999", "expected FROM-TO"],
    ["80-9000", "80 is below 1024"],
    ["1023-2000", "1023 is below 1024"],
    ["4000-70000", "70000 is above 65535"],
    ["5999-4000", "lower than the last"],
    ["4000-4000", "lower than the last"],
    ["6665-6669", "browsers refuse"]
  ])("%j is rejected: %s", (text, message) => {
    const result = parsePortRange(text)
    expect(Either.isLeft(result)).toBe(true)
    if (Either.isLeft(result)) {
      expect(result.left).toContain(message)
      expect(result.left).toContain(`"${text}"`)
    }
  })

  it("accepts exactly the ranges within 1024…65535 with from < to and a usable port", () => {
    FastCheck.assert(
      FastCheck.property(
        FastCheck.integer({ min: 0, max: 70_000 }),
        FastCheck.integer({ min: 0, max: 70_000 }),
        (from, to) => {
          const ok = from >= 1024 && to <= 65_535 && from < to && usablePorts({ from, to }) > 0
          const result = parsePortRange(`${from}-${to}`)
          expect(Either.isRight(result)).toBe(ok)
          if (ok) expect(result).toEqual(Either.right({ from, to }))
        }
      ),
      RUNS
    )
  })
})

describe("portKey", () => {
  it("is readable and names the main port with an empty name", () => {
    expect(portKey({ project: "acme", world: "login-fix", service: "web", name: "" })).toBe("acme/login-fix/web/")
    expect(portKey({ project: "acme", world: "feat/x", service: "api", name: "metrics" })).toBe(
      "acme/feat%2Fx/api/metrics"
    )
  })

  it("gives distinct owners distinct keys, whatever they contain", () => {
    const part = FastCheck.string({ unit: FastCheck.constantFrom("a", "/", "%", "2", "F", "é"), maxLength: 4 })
    const owner = FastCheck.record({ project: part, world: part, service: part, name: part })
    FastCheck.assert(
      FastCheck.property(owner, owner, (a, b) => {
        const same = a.project === b.project && a.world === b.world && a.service === b.service && a.name === b.name
        expect(portKey(a) === portKey(b)).toBe(same)
      }),
      { numRuns: 2000 }
    )
  })
})

const smallRange = FastCheck.tuple(
  FastCheck.integer({ min: 1024, max: 65_000 }),
  FastCheck.integer({ min: 1, max: 60 })
)
  .map(([from, extra]): PortRange => ({ from, to: from + extra }))
  .filter((range) => usablePorts(range) > 0)
/** Ranges that straddle blocked ports, so skipping them is exercised. */
const blockedRange = FastCheck.constantFrom<PortRange>(
  { from: 4040, to: 4050 },
  { from: 5055, to: 5065 },
  { from: 6660, to: 6700 },
  { from: 4185, to: 4195 }
)
const range = FastCheck.oneof(smallRange, blockedRange, FastCheck.constant(defaultPortRange))
const key = FastCheck.string({ maxLength: 12 })

describe("preferredPort and candidatePorts", () => {
  it("prefers from + fnv1a32(key) mod size", () => {
    const k = "acme/login-fix/web/"
    expect(preferredPort(k, defaultPortRange)).toBe(4000 + (fnv1a32(k) % 2000))
    expect(preferredPort(k, defaultPortRange)).toBe(preferredPort(k, defaultPortRange))
  })

  it("probes upward from the preference and wraps", () => {
    const r = { from: 4040, to: 4047 }
    const k = [...Array(200).keys()].map(String).find((s) => preferredPort(s, r) === 4044)!
    expect([...candidatePorts(k, r)]).toEqual([4044, 4046, 4047, 4040, 4041, 4042, 4043])
  })

  it("yields every usable port of the range once, starting at the preference when it is usable", () => {
    FastCheck.assert(
      FastCheck.property(key, range, (k, r) => {
        const ports = [...candidatePorts(k, r)]
        expect(new Set(ports).size).toBe(ports.length)
        expect(ports.length).toBe(usablePorts(r))
        // one assertion over all ports: thousands of `expect` calls per run would dominate the test time
        expect(ports.filter((p) => p < r.from || p > r.to || blockedPorts.has(p))).toEqual([])
        const preferred = preferredPort(k, r)
        expect(preferred).toBeGreaterThanOrEqual(r.from)
        expect(preferred).toBeLessThanOrEqual(r.to)
        if (!blockedPorts.has(preferred)) expect(ports[0]).toBe(preferred)
      }),
      RUNS
    )
  })
})

describe("planPorts", () => {
  it("gives each key its first free candidate, in request order", () => {
    const r = { from: 4040, to: 4047 }
    const keys = ["a", "b", "c"]
    const plan = planned(planPorts(keys, r, none, noLeases))
    const expected = new Map<string, number>()
    const used = new Set<number>()
    for (const k of keys) {
      const port = [...candidatePorts(k, r)].find((p) => !used.has(p))!
      expected.set(k, port)
      used.add(port)
    }
    expect(plan).toEqual(expected)
    expect([...plan.keys()]).toEqual(keys)
  })

  it("keeps a lease even when it is listed as taken, and does not hand it to anyone else", () => {
    const r = { from: 5000, to: 5003 }
    const lease = 5002
    // whichever key would have probed onto 5002 first, `late` holds it
    const plan = planned(planPorts(["x", "y", "z", "late"], r, new Set([lease]), new Map([["late", lease]])))
    expect(plan.get("late")).toBe(lease)
    expect(new Set(plan.values()).size).toBe(4)
  })

  it("drops leases outside the range, on blocked ports or claimed twice", () => {
    const r = { from: 4040, to: 4050 }
    const existing = new Map([
      ["outside", 3000],
      ["blocked", 4045],
      ["first", 4041],
      ["second", 4041]
    ])
    const plan = planned(planPorts(["outside", "blocked", "first", "second"], r, none, existing))
    expect(plan.get("first")).toBe(4041)
    expect(plan.get("second")).not.toBe(4041)
    expect(plan.get("outside")).not.toBe(3000)
    expect(plan.get("blocked")).not.toBe(4045)
    expect(new Set(plan.values()).size).toBe(4)
  })

  it("asks for one port per distinct key", () => {
    const plan = planned(planPorts(["a", "a", "b"], defaultPortRange, none, noLeases))
    expect([...plan.keys()]).toEqual(["a", "b"])
  })

  it("reports an exhausted range with what was wanted and what was free", () => {
    const r = { from: 4044, to: 4047 } // 4045 is blocked: three usable ports
    expect(planPorts(["a", "b", "c", "d"], r, none, noLeases)).toEqual(
      Either.left({ _tag: "RangeExhausted", range: r, wanted: 4, available: 3 })
    )
    expect(planPorts(["a", "b"], r, new Set([4044, 4046]), noLeases)).toEqual(
      Either.left({ _tag: "RangeExhausted", range: r, wanted: 2, available: 1 })
    )
    expect(Either.isRight(planPorts(["a", "b", "c"], r, none, noLeases))).toBe(true)
  })

  const keys = FastCheck.uniqueArray(key, { maxLength: 12 })
  const takenIn = (r: PortRange) =>
    FastCheck.uniqueArray(FastCheck.integer({ min: r.from - 5, max: r.to + 5 }), { maxLength: 30 }).map(
      (ports) => new Set(ports)
    )
  const scenario = range.chain((r) => FastCheck.tuple(FastCheck.constant(r), keys, takenIn(r)))

  it("chooses distinct, unblocked, untaken ports inside the range, or reports exhaustion exactly when short", () => {
    FastCheck.assert(
      FastCheck.property(scenario, ([r, ks, taken]) => {
        const free = [...candidatePorts("", r)].filter((p) => !taken.has(p)).length
        const result = planPorts(ks, r, taken, noLeases)
        if (ks.length > free) {
          expect(result).toEqual(Either.left({ _tag: "RangeExhausted", range: r, wanted: ks.length, available: free }))
          return
        }
        const plan = planned(result)
        expect([...plan.keys()]).toEqual(ks)
        const ports = [...plan.values()]
        expect(new Set(ports).size).toBe(ports.length)
        for (const p of ports) {
          expect(p).toBeGreaterThanOrEqual(r.from)
          expect(p).toBeLessThanOrEqual(r.to)
          expect(blockedPorts.has(p)).toBe(false)
          expect(taken.has(p)).toBe(false)
        }
      }),
      RUNS
    )
  })

  it("is stable: the same inputs give the same plan", () => {
    FastCheck.assert(
      FastCheck.property(scenario, ([r, ks, taken]) => {
        expect(planPorts(ks, r, taken, noLeases)).toEqual(planPorts([...ks], r, new Set(taken), new Map()))
      }),
      RUNS
    )
  })

  it("re-planning with the previous plan as leases changes nothing", () => {
    FastCheck.assert(
      FastCheck.property(scenario, ([r, ks, taken]) => {
        const first = planPorts(ks, r, taken, noLeases)
        if (Either.isLeft(first)) return
        const all = new Set([...taken, ...first.right.values()])
        expect(planPorts(ks, r, all, first.right)).toEqual(first)
      }),
      RUNS
    )
  })

  it("planning worlds one after another never collides", () => {
    const world = FastCheck.record({
      name: FastCheck.string({ minLength: 1, maxLength: 10 }),
      services: FastCheck.uniqueArray(FastCheck.constantFrom("web", "api", "db", "cache", "worker"), { minLength: 1 })
    })
    FastCheck.assert(
      FastCheck.property(
        FastCheck.oneof(blockedRange, FastCheck.constant(defaultPortRange)),
        FastCheck.array(world, { maxLength: 12 }),
        (r, worlds) => {
          const taken = new Set<number>()
          for (const [i, w] of worlds.entries()) {
            const requests = w.services.map((service) =>
              portKey({ project: "acme", world: `${i}-${w.name}`, service, name: "" })
            )
            const result = planPorts(requests, r, taken, noLeases)
            if (Either.isLeft(result)) {
              expect(taken.size + requests.length).toBeGreaterThan(usablePorts(r))
              return
            }
            for (const port of result.right.values()) {
              expect(taken.has(port)).toBe(false)
              taken.add(port)
            }
          }
        }
      ),
      RUNS
    )
  })

  it("a range too small for the request is exhausted", () => {
    FastCheck.assert(
      FastCheck.property(
        range.filter((r) => rangeSize(r) <= 60),
        (r) => {
          const ks = Array.from({ length: usablePorts(r) + 1 }, (_, i) => `k${i}`)
          expect(planPorts(ks, r, none, noLeases)).toEqual(
            Either.left({ _tag: "RangeExhausted", range: r, wanted: ks.length, available: usablePorts(r) })
          )
        }
      ),
      RUNS
    )
  })
})
