/**
 * The CLI's local services (`check`, `init`): a file of its own, so that a command loads no part of the engine. Every
 * other command is a client of the daemon, and `daemon run` loads the engine when it starts one.
 */
import * as NodeContext from "@effect/platform-node/NodeContext"
import * as Layer from "effect/Layer"
import { ConfigFilesLive } from "../services/ConfigFiles.js"

export const CliLive = ConfigFilesLive.pipe(Layer.provideMerge(NodeContext.layer))
