/**
 * The probe line: the backed-off liveness probes that fall due on one tick of the probe grid (`probeDueMs`) go one
 * after another, each as the one before it answers. Probes due together share the daemon's wake, which is most of
 * what an idle probe costs; sent all at once they would also wake every service they ask at once, and on two cores
 * those services take the proxy's turn (requests stalled up to 92 ms with the grid alone). One at a time, each service
 * wakes alone.
 *
 * A probe holds its turn `turnMs` at most: one that has not answered by then goes on beside the next, so a service
 * slow to answer holds up the others no longer. The line is plain callbacks rather than a semaphore: Effect's wakes
 * every waiter at each release, and a tick's probes would wake each other over and over.
 */
import * as Effect from "effect/Effect"

export type ProbeLine = <A, E, R>(probe: Effect.Effect<A, E, R>) => Effect.Effect<A, E, R>

export const makeProbeLine = (turnMs: number): ProbeLine => {
  /** the turns waiting, first come first served */
  const waiting: Array<() => void> = []
  let busy = false
  const passOn = () => {
    const next = waiting.shift()
    if (next === undefined) busy = false
    else next()
  }
  return <A, E, R>(probe: Effect.Effect<A, E, R>) =>
    Effect.suspend(() => {
      /** this probe was given the turn, and has passed it on */
      let given = false
      let passed = false
      let timer: ReturnType<typeof setTimeout> | undefined
      const leave = () => {
        if (!given || passed) return
        passed = true
        if (timer !== undefined) clearTimeout(timer)
        passOn()
      }
      const enter = Effect.async<void>((resume) => {
        if (!busy) {
          busy = true
          given = true
          resume(Effect.void)
          return
        }
        const turn = () => {
          given = true
          resume(Effect.void)
        }
        waiting.push(turn)
        // interrupted while it waits: out of the line (once given the turn, `leave` passes it on)
        return Effect.sync(() => {
          const at = waiting.indexOf(turn)
          if (at >= 0) waiting.splice(at, 1)
        })
      })
      const run = Effect.suspend(() => {
        timer = setTimeout(leave, turnMs)
        timer.unref()
        return probe
      })
      return Effect.ensuring(Effect.zipRight(enter, run), Effect.sync(leave))
    })
}
