import type { Logger } from '../log.ts';
import { platformScope, type Collection, type Store } from '../store/collection.ts';
import { setShareWeights } from '../runtime/share-weights.ts';

/** An organization's weight in the work lane's round robin, set by the operator; absent means 1. */
export interface ShareWeightDoc {
  [field: string]: unknown;
  /** The organization's id. */
  id: string;
  tenantId: string;
  weight: number;
  updatedAt: string;
}

export function shareWeightCollection(store: Store): Collection<ShareWeightDoc> {
  return store.collection<ShareWeightDoc>('share_weights');
}

/** Every weight set, as the work lane's table. */
export async function readShareWeights(weights: Collection<ShareWeightDoc>): Promise<Record<string, number>> {
  const table: Record<string, number> = {};
  for (const doc of await weights.find(platformScope, {}, { limit: 100_000 })) table[doc.id] = doc.weight;
  return table;
}

/**
 * Keeps this process's table of weights (src/runtime/share-weights.ts) as
 * the store has it: read at start, then every `SHARE_WEIGHT_REFRESH_MS`
 * (30 s): an operator's change is in force everywhere within it. A failed
 * read keeps the table it had.
 */
export class ShareWeightRefresh {
  private timer: NodeJS.Timeout | undefined;

  constructor(
    private readonly weights: Collection<ShareWeightDoc>,
    private readonly log: Logger,
    private readonly everyMs: number,
  ) {}

  async start(): Promise<void> {
    await this.refresh();
    this.timer = setInterval(() => void this.refresh(), this.everyMs);
    this.timer.unref();
  }

  stop(): void {
    clearInterval(this.timer);
  }

  private async refresh(): Promise<void> {
    try {
      setShareWeights(await readShareWeights(this.weights));
    } catch (err) {
      this.log.warn({ err }, 'share weights not read: the last ones stay');
    }
  }
}
