/**
 * Small, dependency-free, deterministic hashes used to make names unique and stable across runs.
 * Not cryptographic: they only need to spread similar inputs apart and never change between versions.
 */

const FNV_OFFSET_BASIS = 0x811c9dc5
const FNV_PRIME = 0x01000193

const encoder = new TextEncoder()

/** FNV-1a over the UTF-8 bytes of `s`, as an unsigned 32-bit integer (UTF-8 so results match other tools). */
export const fnv1a32 = (s: string): number => {
  let hash = FNV_OFFSET_BASIS
  for (const byte of encoder.encode(s)) {
    hash ^= byte
    hash = Math.imul(hash, FNV_PRIME)
  }
  return hash >>> 0
}

/** Six base36 digits hold ~31 bits, just under what one fnv1a32 provides. */
const BLOCK = 6
const BLOCK_MODULUS = 36 ** BLOCK

/**
 * A lower-case base36 digest of exactly `length` characters, used as a stable name suffix.
 * Lengths beyond one block chain further fnv1a32 rounds (`s`, `s\0` + 1, …) so longer suffixes carry more entropy
 * instead of leading zeros; the first six characters are the same for every length ≥ 6.
 */
export const shortHash = (s: string, length = 6): string => {
  const wanted = Math.max(0, Math.floor(length))
  let out = ""
  for (let round = 0; out.length < wanted; round++) {
    const hash = fnv1a32(round === 0 ? s : `${s}\u0000${round}`)
    out += (hash % BLOCK_MODULUS).toString(36).padStart(BLOCK, "0")
  }
  return out.slice(0, wanted)
}
