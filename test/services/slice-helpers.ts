/** What the Slices tests share: a slice service on the embedded `dir` adapter, as berth.toml would give it. */
import type * as Model from "../../src/domain/config/model.js"

export const dirSlice = (name: string, migrate: string): Model.SliceService => ({
  _tag: "Slice",
  name,
  adapter: "dir",
  adminUrl: undefined,
  migrate,
  seed: undefined,
  cloneFrom: undefined,
  goldenInputs: [],
  options: {},
  dependsOn: [],
  groups: []
})
