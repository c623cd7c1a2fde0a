export declare const bindingHostVariable: string
export interface PrebuiltMirror {
  /** an address for one install, under a path of its own */
  readonly host: (name: string) => string
  /** how many downloads were asked under that install's path */
  readonly asked: (name: string) => number
  readonly close: () => Promise<void>
}
export declare const startPrebuiltMirror: (repo: string) => Promise<PrebuiltMirror>
