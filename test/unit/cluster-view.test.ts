/** The lookups over what this machine knows of its cluster (cluster/view.ts). */
import { describe, expect, it } from "@effect/vitest"
import {
  anywhereNamed,
  type ClusterView,
  ownsAnywhere,
  remoteById,
  remoteNamed,
  solo,
  withAnywhereRow
} from "../../src/cluster/view.js"
import { remoteWorldId } from "../../src/domain/cluster.js"
import { machineNamed, rowOf, sharedOf, statusOf } from "../cluster/parts.js"

const view: ClusterView = {
  ...solo,
  state: "member",
  name: "m1",
  machines: [machineNamed("m1", 1), machineNamed("m2", 2)],
  worlds: [sharedOf("m2", { ...statusOf("shop", "feat-x"), name: "feat/x" }), sharedOf("m3", statusOf("shop", "lost"))],
  anywhere: [rowOf("shop", "a", "m1"), rowOf("shop", "b", "m2")]
}

describe("the cluster's view", () => {
  it("finds a world of another machine by name or slug in any of the project's labels, with its machine", () => {
    expect(remoteNamed(view, ["shop"], "feat/x")?.machine.name).toBe("m2")
    expect(remoteNamed(view, ["other", "shop"], "feat-x")?.status.name).toBe("feat/x")
    expect(remoteNamed(view, ["other"], "feat-x")).toBeUndefined()
    // a world whose machine is not listed (it left) is nobody's to ask
    expect(remoteNamed(view, ["shop"], "lost")).toBeUndefined()
  })

  it("finds a world of another machine by the id a watcher knows it by", () => {
    expect(remoteById(view, remoteWorldId("m2", "shop", "feat-x"))?.status.slug).toBe("feat-x")
    expect(remoteById(view, remoteWorldId("m2", "shop", "nope"))).toBeUndefined()
  })

  it("tells which worlds that run anywhere are this machine's, and replaces a row it sees afresh", () => {
    expect(ownsAnywhere(view, "shop", "a")).toBe(true)
    expect(ownsAnywhere(view, "shop", "b")).toBe(false)
    expect(anywhereNamed(view, ["shop"], "b")?.owner).toBe("m2")
    const next = withAnywhereRow(view, rowOf("shop", "b", "m1"))
    expect(next.anywhere.filter((r) => r.slug === "b")).toHaveLength(1)
    expect(ownsAnywhere(next, "shop", "b")).toBe(true)
    expect(ownsAnywhere(solo, "shop", "a")).toBe(false)
  })
})
