/**
 * What goes ahead of the next bulk step (work-lane.ts) in this process:
 * work that waits for the next turn of the event loop (a write request
 * waiting out the read it came in, `nextTurn`), and writes made since the
 * last commit (each store that groups a turn's writes into one commit adds
 * itself, `commitFirst`). Both would otherwise wait behind the bulk step
 * queued before them: on the embedded store every write runs in its caller's
 * turn, so a bulk step is as long as its writes, and a single send waits at
 * each of its turns for the step under way.
 */
const waiting = new Set<() => void>();
const committers = new Set<() => boolean>();

/**
 * Resolves in the next turn of the event loop (after the read under way has
 * been parsed to its end): at its own `setImmediate`, or at the start of a
 * bulk slice or of a commit queued before it (`letWaitersGo`), whichever
 * comes first.
 */
export function nextTurn(): Promise<void> {
  return new Promise((resolve) => {
    const go = () => {
      waiting.delete(go);
      resolve();
    };
    waiting.add(go);
    setImmediate(go);
  });
}

/** `commit` (true when it committed anything) runs before each bulk step; the returned function takes it off. */
export function commitFirst(commit: () => boolean): () => void {
  committers.add(commit);
  return () => committers.delete(commit);
}

/**
 * Lets what waits for a turn go, and commits what was written since the
 * last commit; true when there was any of either (their continuations then
 * run before the caller's bulk step, if it waits a turn first).
 */
export function goAhead(): boolean {
  let any = letWaitersGo();
  for (const commit of committers) if (commit()) any = true;
  return any;
}

/** Lets what waits for a turn go (true if anything did): its continuations run before those of what the caller does next. */
export function letWaitersGo(): boolean {
  if (waiting.size === 0) return false;
  for (const go of [...waiting]) go();
  return true;
}

/**
 * Resolves once nothing interactive waits for a turn any more (`goAhead`
 * found none), or after about `withinMs` of letting it go first: what each
 * slice of the lane waits for before its bulk step, and what bulk work that
 * runs as its own commit's continuation, outside any slice (a job's hand-out
 * after its status step), waits for the same way.
 */
export async function afterInteractive(withinMs = 2): Promise<void> {
  const since = performance.now();
  while (performance.now() - since < withinMs && goAhead()) await new Promise((resolve) => setImmediate(resolve));
}
