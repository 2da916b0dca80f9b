/**
 * Masks the people in a log line: phone numbers (E.164, `+14155550123` →
 * `+1415•••0123`) and email handles (`jane@example.com` → `j•••@example.com`),
 * wherever they appear in a string, so a support bundle or a log shipper never
 * holds a customer's contacts. `--log-handles` turns it off for a support session.
 */
/** `+` and a digit, then digits with the separators people write (`+1 (415) 555-0123`). */
const phone = /\+\d[\d ().-]{4,24}\d/g;
const email = /([^\s@"'<>(),;:[\]]+)@([A-Za-z0-9-]+(?:\.[A-Za-z0-9-]+)+)/g;
const dots = '•••';

export function maskHandles(text: string): string {
  return text
    .replace(phone, (written) => {
      const digits = written.replace(/\D/g, '');
      if (digits.length < 7) return written;
      const keep = digits.length >= 10 ? 4 : 2;
      return `+${digits.slice(0, keep)}${dots}${digits.slice(-keep)}`;
    })
    .replace(email, (_, local: string, domain: string) => `${local.slice(0, 1)}${dots}@${domain}`);
}

/** A copy of a log line's fields with every string masked, at any depth. */
export function maskFields(value: unknown): unknown {
  if (typeof value === 'string') return maskHandles(value);
  if (Array.isArray(value)) return value.map(maskFields);
  if (value !== null && typeof value === 'object' && !(value instanceof Error)) {
    return Object.fromEntries(Object.entries(value).map(([key, field]) => [key, maskFields(field)]));
  }
  return value;
}
