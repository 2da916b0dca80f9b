import { setImmediate as nextTurn } from 'node:timers/promises';
import type { Doc, Sort } from './collection.ts';
import { valueAt } from './memory-index.ts';
import { compareValues } from './query.ts';

/** Documents tested and sorted between two turns of the event loop (about a millisecond's work). */
const runDocs = 2_000;

interface Run<T> {
  docs: T[];
  keys: unknown[][];
  at: number;
}

/**
 * The documents of `pool` that pass `test`, in `sort` order (which must be
 * total), a page at a time, without holding the event loop: the pool is
 * tested and sorted in runs of `runDocs`, a turn of the event loop after each,
 * and the runs are merged lazily (a heap keyed by each run's next document),
 * a turn after each page. O(n log n) in total, never more than one run's or
 * one page's work at once.
 */
export async function* sortedPages<T extends Doc>(pool: readonly T[], test: (doc: T) => boolean, sort: Sort, pageSize: number): AsyncGenerator<T[]> {
  const fields = Object.entries(sort).map(([field, dir]) => ({ path: field.split('.'), dir }));
  const compareKeys = (a: unknown[], b: unknown[]): number => {
    for (let f = 0; f < fields.length; f++) {
      const c = compareValues(a[f], b[f]);
      if (c !== 0) return c * fields[f]!.dir;
    }
    return 0;
  };
  const heap: Run<T>[] = [];
  for (let start = 0; start < pool.length; start += runDocs) {
    const docs = pool.slice(start, start + runDocs).filter(test);
    const keys = docs.map((doc) => fields.map((f) => valueAt(doc, f.path)));
    const order = docs.map((_, i) => i).sort((a, b) => compareKeys(keys[a]!, keys[b]!));
    if (order.length > 0) heap.push({ docs: order.map((i) => docs[i]!), keys: order.map((i) => keys[i]!), at: 0 });
    await nextTurn();
  }
  const before = (a: Run<T>, b: Run<T>): boolean => compareKeys(a.keys[a.at]!, b.keys[b.at]!) < 0;
  const siftDown = (at: number): void => {
    for (;;) {
      const left = 2 * at + 1;
      if (left >= heap.length) return;
      const right = left + 1;
      const child = right < heap.length && before(heap[right]!, heap[left]!) ? right : left;
      if (!before(heap[child]!, heap[at]!)) return;
      [heap[at], heap[child]] = [heap[child]!, heap[at]!];
      at = child;
    }
  };
  for (let i = (heap.length >> 1) - 1; i >= 0; i--) siftDown(i);
  let page: T[] = [];
  while (heap.length > 0) {
    const run = heap[0]!;
    page.push(run.docs[run.at++]!);
    if (run.at === run.docs.length) heap[0] = heap[heap.length - 1]!, heap.pop();
    siftDown(0);
    if (page.length === pageSize) {
      yield page;
      page = [];
      await nextTurn();
    }
  }
  if (page.length > 0) yield page;
}
