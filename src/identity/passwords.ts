import argon2 from 'argon2';

/** OWASP's argon2id baseline: 19 MiB of memory, 2 passes, 1 lane. */
const argonOptions = { type: argon2.argon2id, memoryCost: 19_456, timeCost: 2, parallelism: 1 } as const;

export function hashPassword(password: string): Promise<string> {
  return argon2.hash(password, argonOptions);
}

/** Made once, so checking an unknown email costs what checking a wrong password costs. */
let decoyHash: Promise<string> | undefined;

/**
 * Verifies a password against a stored hash, or against a decoy when there is
 * no such user, so both failures take the same time.
 */
export async function verifyPassword(storedHash: string | undefined, password: string): Promise<boolean> {
  decoyHash ??= hashPassword('decoy password that matches no account');
  const hash = storedHash ?? (await decoyHash);
  try {
    const ok = await argon2.verify(hash, password);
    return ok && storedHash !== undefined;
  } catch {
    return false;
  }
}
