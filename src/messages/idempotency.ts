import { AppError } from '../errors.ts';
import { sha256 } from '../identity/secrets.ts';
import { nowIso } from '../ids.ts';
import { setTimeout as sleep } from 'node:timers/promises';
import type { Collection } from '../store/collection.ts';
import type { IdempotencyDoc } from './message-store.ts';

export type IdempotentAnswer<A> = A & { replayed: boolean };

const keepMs = 24 * 3600 * 1000;
const waitForFirstMs = 5_000;

/**
 * `Idempotency-Key` (decisions.md, "Common"): per organization, a repeat
 * within 24 h replays the first answer, the same key with another body is
 * 422. The key is claimed before the work, so two concurrent requests with
 * one key do the work once. A request that fails gives its key back.
 */
export class IdempotencyKeys {
  constructor(private readonly keys: Collection<IdempotencyDoc>) {}

  /** A replayed answer is the stored answer of the same `work`, so it has the work's type. */
  async run<A extends { status: number; body: unknown }>(
    tenantId: string,
    key: string | undefined,
    body: unknown,
    work: () => Promise<A>,
  ): Promise<IdempotentAnswer<A>> {
    if (key === undefined) return { ...(await work()), replayed: false };
    if (key.length === 0 || key.length > 255)
      throw new AppError('validation_error', 'Idempotency-Key must be 1 to 255 characters', {
        details: [{ path: '/Idempotency-Key', message: 'must be 1 to 255 characters' }],
      });
    const scope = { tenantId };
    const id = sha256(`${tenantId}\u0000${key}`);
    const requestHash = sha256(JSON.stringify(body));
    const claimed = await this.claim(scope, id, requestHash);
    if (!claimed) return this.replay<A>(scope, id, requestHash);
    try {
      const answer = await work();
      await this.keys.updateOne(scope, { id }, { $set: { response: answer } });
      return { ...answer, replayed: false };
    } catch (err) {
      await this.keys.deleteOne(scope, { id }).catch(() => false);
      throw err;
    }
  }

  private async claim(scope: { tenantId: string }, id: string, requestHash: string): Promise<boolean> {
    const now = Date.now();
    const expired = await this.keys.findOne(scope, { id, expiresAt: { $lte: new Date(now).toISOString() } });
    if (expired) await this.keys.deleteOne(scope, { id, expiresAt: expired.expiresAt });
    try {
      await this.keys.insertOne(scope, {
        id,
        tenantId: scope.tenantId,
        requestHash,
        expiresAt: new Date(now + keepMs).toISOString(),
        createdAt: nowIso(),
      });
      return true;
    } catch (err) {
      if (err instanceof AppError && err.code === 'conflict') return false;
      throw err;
    }
  }

  private async replay<A>(scope: { tenantId: string }, id: string, requestHash: string): Promise<IdempotentAnswer<A>> {
    const deadline = Date.now() + waitForFirstMs;
    for (;;) {
      const first = await this.keys.findOne(scope, { id });
      if (!first) throw new AppError('conflict', 'the first request with this Idempotency-Key failed; send it again');
      if (first.requestHash !== requestHash)
        throw new AppError('idempotency_mismatch', 'this Idempotency-Key was used with a different request body');
      if (first.response) return { ...(first.response as A), replayed: true };
      if (Date.now() > deadline)
        throw new AppError('conflict', 'a request with this Idempotency-Key is still being processed');
      await sleep(25);
    }
  }
}
