/**
 * berth's error messages end with `\n  hint: …`; structured results carry the advice apart from the message so an
 * agent can act on it.
 */
export const splitHint = (text: string): { readonly message: string; readonly hint: string | undefined } => {
  const at = text.lastIndexOf("\n  hint: ")
  return at === -1
    ? { message: text, hint: undefined }
    : { message: text.slice(0, at), hint: text.slice(at + "\n  hint: ".length).trim() }
}
