/** `scheme://user:secret@host` → `scheme://user:***@host`: what berth shows of an address that may carry a password. */
export const hidePassword = (url: string): string =>
  url.replace(/^([a-z][a-z0-9+.-]*:\/\/[^/@:\s]*:)[^@/\s]+@/i, "$1***@")

const URL_PASSWORD = /^[a-z][a-z0-9+.-]*:\/\/[^/@:\s]*:([^@/\s]+)@/i
const SECRET_NAME = /pass|secret|token|key|credential|auth|private|cookie|session/i

/** The password an address carries (`scheme://user:secret@host`), if any. */
export const passwordOf = (url: string): string | undefined => {
  const m = URL_PASSWORD.exec(url)
  if (m?.[1] === undefined) return undefined
  try {
    return decodeURIComponent(m[1])
  } catch {
    return m[1]
  }
}

/**
 * What must never appear in what berth shows or logs from an environment: the values of secret-looking names and the
 * passwords inside any address. Short values are left alone (masking "1" everywhere would hide nothing and garble all).
 */
export const secretsOf = (env: Readonly<Record<string, string>>): ReadonlyArray<string> => {
  const out = new Set<string>()
  for (const [name, value] of Object.entries(env)) {
    if (SECRET_NAME.test(name) && value.length >= 4) out.add(value)
    const password = passwordOf(value)
    if (password !== undefined && password.length >= 4) {
      out.add(password)
      out.add(encodeURIComponent(password))
    }
  }
  return [...out]
}

/** The passwords inside a set of addresses (a world's slice URLs). */
export const urlSecrets = (urls: ReadonlyMap<string, string> | ReadonlyArray<string>): ReadonlyArray<string> => {
  const out = new Set<string>()
  for (const url of Array.isArray(urls) ? urls : [...(urls as ReadonlyMap<string, string>).values()]) {
    const password = passwordOf(url)
    if (password !== undefined && password.length >= 4) out.add(password)
  }
  return [...out]
}
