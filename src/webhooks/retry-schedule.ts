import type { WebhookConfig } from '../config.ts';
import type { AttemptResult } from './webhook-sender.ts';

export type NextStep =
  | { kind: 'succeeded' }
  | { kind: 'retry'; delayMs: number }
  | { kind: 'failed' }
  /** 410 Gone: the receiver asks us to stop, so the webhook is disabled. */
  | { kind: 'gone' };

const factor = 4;
const jitter = 0.2;
/** The schedule's fixed shape, as the retry policy route answers it. */
export const retryShape = { factor, jitter } as const;

/** Delay after the `attempts`-th failed attempt: base × 4^(attempts-1), capped, ±20 % jitter. */
export function backoffMs(
  attempts: number,
  cfg: Pick<WebhookConfig, 'retryBaseMs' | 'retryCapMs'>,
  random = Math.random,
): number {
  const plain = Math.min(cfg.retryBaseMs * factor ** Math.max(0, attempts - 1), cfg.retryCapMs);
  return Math.round(plain * (1 - jitter + 2 * jitter * random()));
}

/** What follows an attempt, `attempts` counting it. Retry-After (429, 503) is honoured up to the cap. */
export function nextStep(
  result: AttemptResult,
  attempts: number,
  cfg: Pick<WebhookConfig, 'retryBaseMs' | 'retryCapMs' | 'maxAttempts'>,
): NextStep {
  if (result.ok) return { kind: 'succeeded' };
  if (result.responseStatus === 410) return { kind: 'gone' };
  if (attempts >= cfg.maxAttempts) return { kind: 'failed' };
  if (result.retryAfterMs !== undefined)
    return { kind: 'retry', delayMs: Math.min(result.retryAfterMs, cfg.retryCapMs) };
  return { kind: 'retry', delayMs: backoffMs(attempts, cfg) };
}
