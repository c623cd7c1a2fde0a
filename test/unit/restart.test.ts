import { describe, expect, it } from "@effect/vitest"
import * as FastCheck from "effect/FastCheck"
import type { ExitStatus, RestartInput, RestartPolicy } from "../../src/domain/restart.js"
import {
  backoffDelay,
  decideRestart,
  defaultRestartLimits,
  exitDescription,
  isCleanExit,
  RestartDecision,
  restartsInWindow
} from "../../src/domain/restart.js"

const RUNS = { numRuns: 500 }

const NOW = 1_000_000
const clean: ExitStatus = { code: 0, signal: null }
const crash: ExitStatus = { code: 1, signal: null }
const segv: ExitStatus = { code: null, signal: "SIGSEGV" }

const input = (overrides: Partial<RestartInput>): RestartInput => ({
  policy: "on-failure",
  exit: crash,
  stoppedByUs: false,
  recentRestarts: [],
  now: NOW,
  ...overrides
})

/** `n` restarts spread over the last few seconds, all inside the default window. */
const recent = (n: number): ReadonlyArray<number> => Array.from({ length: n }, (_, i) => NOW - 1000 * (i + 1))

describe("exitDescription", () => {
  it.each([
    [{ code: 1, signal: null }, "exit code 1"],
    [{ code: 0, signal: null }, "exit code 0"],
    [{ code: 137, signal: null }, "exit code 137"],
    [{ code: null, signal: "SIGKILL" }, "killed by SIGKILL"],
    [{ code: null, signal: "SIGSEGV" }, "killed by SIGSEGV"],
    [{ code: 1, signal: "SIGTERM" }, "killed by SIGTERM"],
    [{ code: null, signal: null }, "exit status unknown"]
  ] as const)("%j → %s", (exit, text) => {
    expect(exitDescription(exit)).toBe(text)
  })

  it("only code 0 without a signal is clean", () => {
    expect(isCleanExit(clean)).toBe(true)
    expect(isCleanExit(crash)).toBe(false)
    expect(isCleanExit(segv)).toBe(false)
    expect(isCleanExit({ code: 0, signal: "SIGTERM" })).toBe(false)
    expect(isCleanExit({ code: null, signal: null })).toBe(false)
  })
})

describe("decideRestart", () => {
  it.each([
    ["stopped by us, crashed", input({ stoppedByUs: true }), RestartDecision.Done()],
    ["stopped by us, policy always", input({ stoppedByUs: true, policy: "always" }), RestartDecision.Done()],
    ["stopped by us, over budget", input({ stoppedByUs: true, recentRestarts: recent(9) }), RestartDecision.Done()],
    ["policy no, crashed", input({ policy: "no" }), RestartDecision.Done()],
    ["policy no, killed", input({ policy: "no", exit: segv }), RestartDecision.Done()],
    ["on-failure, clean exit", input({ exit: clean }), RestartDecision.Done()],
    ["on-failure, first crash", input({}), RestartDecision.Restart({ delayMs: 500, attempt: 1 })],
    ["on-failure, killed", input({ exit: segv }), RestartDecision.Restart({ delayMs: 500, attempt: 1 })],
    [
      "on-failure, 1 recent",
      input({ recentRestarts: recent(1) }),
      RestartDecision.Restart({ delayMs: 1000, attempt: 2 })
    ],
    [
      "on-failure, 4 recent",
      input({ recentRestarts: recent(4) }),
      RestartDecision.Restart({ delayMs: 8000, attempt: 5 })
    ],
    [
      "always, clean exit",
      input({ policy: "always", exit: clean }),
      RestartDecision.Restart({ delayMs: 500, attempt: 1 })
    ],
    [
      "old restarts fall out of the window",
      input({ recentRestarts: [NOW - 60_000, NOW - 120_000, NOW - 5_000] }),
      RestartDecision.Restart({ delayMs: 1000, attempt: 2 })
    ],
    [
      "the cap applies",
      input({ recentRestarts: recent(8), limits: { maxRestarts: 20 } }),
      RestartDecision.Restart({ delayMs: 30_000, attempt: 9 })
    ],
    [
      "custom base and cap",
      input({ recentRestarts: recent(3), limits: { baseDelayMs: 100, maxDelayMs: 700 } }),
      RestartDecision.Restart({ delayMs: 700, attempt: 4 })
    ],
    [
      "five restarts in the window: give up",
      input({ recentRestarts: recent(5) }),
      RestartDecision.GiveUp({ reason: "restarted 5 times in 60s and crashed again (exit code 1)" })
    ],
    [
      "give up on a signal",
      input({ recentRestarts: recent(7), exit: segv }),
      RestartDecision.GiveUp({ reason: "restarted 7 times in 60s and crashed again (killed by SIGSEGV)" })
    ],
    [
      "give up on clean exits that keep coming back",
      input({ policy: "always", exit: clean, recentRestarts: recent(2), limits: { maxRestarts: 2, windowMs: 10_000 } }),
      RestartDecision.GiveUp({ reason: "restarted 2 times in 10s and exited again (exit code 0)" })
    ],
    [
      "maxRestarts 0 never restarts a crash",
      input({ limits: { maxRestarts: 0 } }),
      RestartDecision.GiveUp({ reason: "restarted 0 times in 60s and crashed again (exit code 1)" })
    ]
  ] as const)("%s", (_, given, decision) => {
    expect(decideRestart(given)).toEqual(decision)
  })

  it("counts restarts strictly younger than the window", () => {
    expect(restartsInWindow([NOW - 60_000, NOW - 59_999, NOW, NOW + 5], NOW, 60_000)).toBe(3)
  })

  const policy = FastCheck.constantFrom<RestartPolicy>("no", "on-failure", "always")
  const exit = FastCheck.record({
    code: FastCheck.option(FastCheck.integer({ min: 0, max: 255 }), { nil: null }),
    signal: FastCheck.option(FastCheck.constantFrom("SIGTERM", "SIGKILL", "SIGSEGV"), { nil: null })
  })
  const limits = FastCheck.record(
    {
      maxRestarts: FastCheck.integer({ min: 0, max: 12 }),
      windowMs: FastCheck.integer({ min: 1, max: 600_000 }),
      baseDelayMs: FastCheck.integer({ min: 0, max: 10_000 }),
      maxDelayMs: FastCheck.integer({ min: 0, max: 120_000 })
    },
    { requiredKeys: [] }
  )
  const anyInput = FastCheck.record({
    policy,
    exit,
    stoppedByUs: FastCheck.boolean(),
    recentRestarts: FastCheck.array(FastCheck.integer({ min: NOW - 700_000, max: NOW }), { maxLength: 20 }),
    now: FastCheck.constant(NOW),
    limits
  })

  it("never restarts what we stopped", () => {
    FastCheck.assert(
      FastCheck.property(anyInput, (given) => {
        expect(decideRestart({ ...given, stoppedByUs: true })).toEqual(RestartDecision.Done())
      }),
      RUNS
    )
  })

  it("gives up exactly when the restarts in the window reach the limit", () => {
    FastCheck.assert(
      FastCheck.property(anyInput, (given) => {
        const decision = decideRestart(given)
        const resolved = { ...defaultRestartLimits, ...given.limits }
        const n = restartsInWindow(given.recentRestarts, given.now, resolved.windowMs)
        const leaveDown =
          given.stoppedByUs || given.policy === "no" || (given.policy === "on-failure" && isCleanExit(given.exit))
        if (leaveDown) expect(decision._tag).toBe("Done")
        else if (n >= resolved.maxRestarts) expect(decision._tag).toBe("GiveUp")
        else expect(decision).toEqual(RestartDecision.Restart({ delayMs: backoffDelay(n, resolved), attempt: n + 1 }))
      }),
      RUNS
    )
  })

  it("a restart's delay stays within [0, cap]", () => {
    FastCheck.assert(
      FastCheck.property(anyInput, (given) => {
        const decision = decideRestart(given)
        if (decision._tag === "Restart") {
          expect(decision.delayMs).toBeGreaterThanOrEqual(0)
          expect(decision.delayMs).toBeLessThanOrEqual(given.limits.maxDelayMs ?? defaultRestartLimits.maxDelayMs)
        }
      }),
      RUNS
    )
  })
})

describe("backoffDelay", () => {
  it.each([
    [0, 500],
    [1, 1000],
    [2, 2000],
    [5, 16_000],
    [6, 30_000],
    [100, 30_000],
    [5000, 30_000]
  ])("n = %i → %i ms", (n, delay) => {
    expect(backoffDelay(n)).toBe(delay)
  })

  const delayLimits = FastCheck.record({
    baseDelayMs: FastCheck.integer({ min: 0, max: 60_000 }),
    maxDelayMs: FastCheck.integer({ min: 0, max: 600_000 })
  })

  it("never exceeds the cap and never decreases as n grows", () => {
    FastCheck.assert(
      FastCheck.property(
        delayLimits,
        FastCheck.integer({ min: 0, max: 2000 }),
        FastCheck.integer({ min: 0, max: 2000 }),
        (l, a, b) => {
          const [lo, hi] = a <= b ? [a, b] : [b, a]
          const dLo = backoffDelay(lo, l)
          const dHi = backoffDelay(hi, l)
          expect(Number.isFinite(dHi)).toBe(true)
          expect(dHi).toBeLessThanOrEqual(l.maxDelayMs)
          expect(dLo).toBeLessThanOrEqual(dHi)
        }
      ),
      RUNS
    )
  })

  it("decideRestart's delays grow with the number of recent restarts", () => {
    FastCheck.assert(
      FastCheck.property(FastCheck.integer({ min: 0, max: 30 }), (n) => {
        const at = (k: number) => decideRestart(input({ recentRestarts: recent(k), limits: { maxRestarts: 100 } }))
        const [first, second] = [at(n), at(n + 1)]
        if (first._tag !== "Restart" || second._tag !== "Restart") throw new Error("expected restarts")
        expect(first.delayMs).toBeLessThanOrEqual(second.delayMs)
        expect(second.attempt).toBe(first.attempt + 1)
      }),
      RUNS
    )
  })
})
