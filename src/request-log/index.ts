import type { ListCursors } from '../http/list-cursors.ts';
import type { AnsweredHook, RequestContext } from '../http/route.ts';
import type { Logger } from '../log.ts';
import type { Principal } from '../roles.ts';
import type { Collection, Store } from '../store/collection.ts';
import { requestChunkCollection, type RequestChunkDoc } from './request-chunks.ts';
import { requestLogRoutes } from './request-log.routes.ts';
import { RequestRecorder, type RequestRecorderOptions } from './request-recorder.ts';

export { RequestRecorder } from './request-recorder.ts';
export { requestChunkCollection, type RequestChunkDoc } from './request-chunks.ts';

/** Path parameters whose value is a credential: the log keeps their name, never their value. */
const secretParams = new Set(['token']);
/** The longest path kept: an id past it is not one this API made. */
const maxPathChars = 512;

/** Declares the request log's collection (before the store's init). */
export function declareRequestLog(store: Store): Collection<RequestChunkDoc> {
  return requestChunkCollection(store);
}

/**
 * The request log, wired: the recorder every frontend's answers go to
 * (`answered`, the HTTP server's hook), and its route. Only requests made
 * with an organization's credential are recorded: one refused before its
 * organization is known (no or a bad credential, a malformed request) has no
 * log to go to.
 */
export function createRequestLog(
  chunks: Collection<RequestChunkDoc>,
  cursors: ListCursors,
  opts: RequestRecorderOptions,
  log: Logger,
): { recorder: RequestRecorder; routes: ReturnType<typeof requestLogRoutes>; answered: AnsweredHook } {
  const recorder = new RequestRecorder(chunks, opts, log);
  return {
    recorder,
    routes: requestLogRoutes(chunks, cursors, recorder.now),
    answered(ctx, status, error, durationMs) {
      const principal = ctx.principal as Partial<Principal> | undefined;
      if (typeof principal?.tenantId !== 'string') return;
      recorder.record(principal.tenantId, {
        at: Math.round(recorder.now() - durationMs),
        method: ctx.method,
        route: ctx.route,
        path: pathOf(ctx),
        status,
        keyId: principal.apiKeyId ?? null,
        requestId: ctx.reqId,
        durationMs: Math.round(durationMs * 10) / 10,
        error: error ?? null,
      });
    },
  };
}

/** The route template with the request's parameters in it (a credential's left as its name); without the query string. */
function pathOf(ctx: RequestContext): string {
  const path = ctx.route.replace(/:(\w+)/g, (name, param: string) =>
    secretParams.has(param) ? name : encodeURIComponent(String((ctx.params as Record<string, unknown>)[param] ?? '')),
  );
  return path.length > maxPathChars ? path.slice(0, maxPathChars) : path;
}
