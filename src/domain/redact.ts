/** `scheme://user:secret@host` → `scheme://user:***@host`: what berth shows of an address that may carry a password. */
export const hidePassword = (url: string): string =>
  url.replace(/^([a-z][a-z0-9+.-]*:\/\/[^/@:\s]*:)[^@/\s]+@/i, "$1***@")
