import { describe, expect, it } from "@effect/vitest"
import * as FastCheck from "effect/FastCheck"
import { bodyComplete, finalHead, finalStatus, MAX_STATUS_SEARCH_BYTES } from "../../src/domain/http-status.js"

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

describe("finalHead and bodyComplete", () => {
  const whole = (answer: string): boolean => {
    const head = finalHead(answer)
    return head !== null && bodyComplete(head.framing, answer.slice(head.bodyAt))
  }

  it("reads how the final answer's body ends", () => {
    expect(finalHead("HTTP/1.1 200 OK\r\ncontent-length: 2\r\n\r\nok")).toEqual({
      bodyAt: 38,
      framing: { _tag: "Length", length: 2 }
    })
    expect(
      finalHead("HTTP/1.1 200 OK\r\nTransfer-Encoding: gzip, chunked\r\ncontent-length: 9\r\n\r\n")?.framing
    ).toEqual({
      _tag: "Chunked"
    })
    expect(finalHead("HTTP/1.0 200 OK\r\n\r\nok")?.framing).toEqual({ _tag: "UntilClose" })
    expect(finalHead("HTTP/1.1 204 No Content\r\ncontent-length: 5\r\n\r\n")?.framing).toEqual({
      _tag: "Length",
      length: 0
    })
    expect(finalHead("HTTP/1.1 304\n\n")?.framing).toEqual({ _tag: "Length", length: 0 })
    // the interim answer's headers are not the final one's
    expect(finalHead("HTTP/1.1 100 Continue\r\ncontent-length: 1\r\n\r\nHTTP/1.1 200 OK\r\n\r\n")?.framing).toEqual({
      _tag: "UntilClose"
    })
  })

  it("has no head while it is not whole or is no HTTP", () => {
    expect(finalHead("HTTP/1.1 200 OK\r\ncontent-length: 2\r\n")).toBeNull()
    expect(finalHead("HTTP/1.1 100 Continue\r\n\r\n")).toBeNull()
    expect(finalHead("SSH-2.0-OpenSSH_9.2\r\n\r\n")).toBeNull()
  })

  it("says a body is whole once its length, or its last chunk and trailers, are in; one that runs to the close never is", () => {
    expect(whole("HTTP/1.1 200 OK\r\ncontent-length: 2\r\n\r\nok")).toBe(true)
    expect(whole("HTTP/1.1 200 OK\r\ncontent-length: 2\r\n\r\no")).toBe(false)
    expect(whole("HTTP/1.1 204\r\n\r\n")).toBe(true)
    expect(whole("HTTP/1.1 200 OK\r\ntransfer-encoding: chunked\r\n\r\n2\r\nok\r\n0\r\n\r\n")).toBe(true)
    expect(whole("HTTP/1.1 200 OK\r\ntransfer-encoding: chunked\r\n\r\n2;x=y\r\nok\r\n0\r\nx-t: 1\r\n\r\n")).toBe(true)
    expect(whole("HTTP/1.1 200 OK\r\ntransfer-encoding: chunked\r\n\r\n2\r\nok\r\n0\r\nx-t: 1\r\n")).toBe(false)
    // a chunk whose data looks like the last chunk is data
    expect(whole("HTTP/1.1 200 OK\r\ntransfer-encoding: chunked\r\n\r\n5\r\n0\r\n\r\n\r\n")).toBe(false)
    expect(whole("HTTP/1.1 200 OK\r\ntransfer-encoding: chunked\r\n\r\nzz\r\n")).toBe(false)
    expect(whole("HTTP/1.0 200 OK\r\n\r\nok")).toBe(false)
  })

  it("is whole only at the answer's last byte, however it is cut", () => {
    const answers = [
      "HTTP/1.1 103 Early Hints\r\n\r\nHTTP/1.1 200 OK\r\ncontent-length: 5\r\n\r\nhello",
      "HTTP/1.1 200 OK\r\ntransfer-encoding: chunked\r\n\r\n5\r\nhello\r\n1\r\n!\r\n0\r\n\r\n",
      "HTTP/1.1 503 Busy\ncontent-length: 0\n\n"
    ]
    FastCheck.assert(
      FastCheck.property(FastCheck.constantFrom(...answers), FastCheck.nat(), (answer, n) => {
        const cut = n % answer.length
        expect(whole(answer.slice(0, cut))).toBe(false)
        expect(whole(answer)).toBe(true)
      })
    )
  })
})
