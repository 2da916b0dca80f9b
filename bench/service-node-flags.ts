/**
 * The Node flags `npm start` and the Procfile run the service with: one V8
 * background thread, so that on a machine with 2 cores V8's helpers (GC,
 * compilation) do not take the event loop's core from it.
 */
export const serviceNodeFlags = ['--v8-pool-size=1'];
