import { describe, expect, it } from "@effect/vitest"
import * as FastCheck from "effect/FastCheck"
import { finalStatus, MAX_STATUS_SEARCH_BYTES } from "../../src/domain/http-status.js"

describe("finalStatus", () => {
  it("reads the status of an HTTP/1.0 or 1.1 answer, with or without a reason", () => {
    expect(finalStatus("HTTP/1.1 200 OK\r\ncontent-length: 2\r\n\r\nok")).toBe(200)
    expect(finalStatus("HTTP/1.0 503 Service Unavailable\r\n")).toBe(503)
    expect(finalStatus("HTTP/1.1 204\r\n\r\n")).toBe(204)
    expect(finalStatus("HTTP/1.1 404\n\n")).toBe(404)
  })

  it("waits for the status line to be whole", () => {
    expect(finalStatus("")).toBeNull()
    expect(finalStatus("HTTP/1.1 20")).toBeNull()
    expect(finalStatus("HTTP/1.1 200 OK")).toBeNull()
  })

  it("skips interim answers to the final one, waiting while it has not come", () => {
    expect(finalStatus("HTTP/1.1 103 Early Hints\r\nlink: </a.css>\r\n\r\nHTTP/1.1 200 OK\r\n\r\n")).toBe(200)
    expect(finalStatus("HTTP/1.1 100 Continue\r\n\r\n")).toBeNull()
    expect(finalStatus("HTTP/1.1 100 Continue\r\n\r\nHTTP/1.1 500 Oops\r\n")).toBe(500)
  })

  it("says an answer that is no HTTP/1.x is none", () => {
    expect(finalStatus("SSH-2.0-OpenSSH_9.2\r\n")).toBeUndefined()
    expect(finalStatus("HTTP/2 200\r\n")).toBeUndefined()
    expect(finalStatus("HTTP/1.1 2000 OK\r\n")).toBeUndefined()
    expect(finalStatus("HTTP/1.1 099\r\n")).toBeUndefined()
    expect(finalStatus("x".repeat(MAX_STATUS_SEARCH_BYTES + 1))).toBeUndefined()
  })

  it("reads the same status however the answer is cut into pieces", () => {
    const answer = "HTTP/1.1 100 Continue\r\n\r\nHTTP/1.1 302 Found\r\nlocation: /\r\n\r\n"
    FastCheck.assert(
      FastCheck.property(FastCheck.integer({ min: 0, max: answer.length }), (cut) => {
        const partial = finalStatus(answer.slice(0, cut))
        expect(partial === null || partial === 302).toBe(true)
        expect(finalStatus(answer)).toBe(302)
      })
    )
  })
})
