/**
 * The import rules of src/, packages/ and web/, checked by `npm run depcruise` (and so
 * by `npm test`): imports only go down, and nothing imports in a circle.
 * Layers, from the bottom: shared leaves (errors, ids, config, roles,
 * relay-protocol), store and runtime, events and http, actor protocols,
 * features and actors, the composition root (app.ts) and main.ts.
 */
const features =
  '^src/(messages|relays|contacts|identity|jobs|webhooks|automations|suppressions|dashboard|admin|request-log)/';
const aboveFeatures =
  '^src/(actors|messages|relays|contacts|identity|jobs|webhooks|automations|suppressions|dashboard|admin|request-log|ws)/|^src/(app|main)\\.ts$';

/**
 * The features' services, named by what they are: what answers a request
 * (the services and read models behind the routes, idempotency, the send
 * path's group commit, sign-in, registration tokens), what hands events on
 * (the routers and the consumer loop), and each feature's wiring (its
 * index.ts). Actors run beneath them and import none of them; what both need
 * (stores, protocols, metrics, pure rules) lives in modules of its own.
 */
const services = [
  '^src/(messages|jobs|webhooks|automations|contacts|identity|relays|events|request-log|suppressions)/index\\.ts$',
  '^src/suppressions/(suppression-service|opt-out-inbound)\\.ts$',
  '^src/messages/(send-service|send-committer|idempotency|message-queries|attachment-links)\\.ts$',
  '^src/jobs/(job-service|job-queries)\\.ts$',
  '^src/webhooks/(webhook-service|webhook-router)\\.ts$',
  '^src/automations/(automation-service|automation-router)\\.ts$',
  '^src/contacts/(contact-service|contact-groups|contact-directory|contact-import|contact-export|contact-upload)\\.ts$',
  '^src/identity/(identity-service|request-auth|jwt|passwords)\\.ts$',
  '^src/relays/relay-registry\\.ts$',
  '^src/events/(event-consumer|event-log)\\.ts$',
  '^src/admin/',
];

/** Each backend's or socket library's package, and the only code that may import it. */
const onlyImportedBy = [
  {
    name: 'only-runtime-imports-ioredis',
    comment: "Redis is the runtime's.",
    importers: '^src/runtime/',
    module: 'ioredis',
  },
  {
    name: 'only-store-imports-mongodb',
    comment: "MongoDB is the store's.",
    importers: '^src/store/',
    module: 'mongodb',
  },
  {
    name: 'only-frontends-import-uws',
    comment:
      'Actors and features never touch a socket: only the HTTP server and the relay gateway import uWebSockets.js.',
    importers: '^src/(http|ws)/|^src/main\\.ts$',
    module: '@trufflesuite/uws-js-unofficial',
  },
];

module.exports = {
  forbidden: [
    {
      name: 'no-circular',
      comment: 'A circle of imports has no bottom: split the shared part into a module both import.',
      severity: 'error',
      from: {},
      to: { circular: true },
    },
    {
      name: 'protocol-imports-only-runtime',
      comment:
        "An actor's protocol.ts is its contract: it imports the runtime, the relay protocol's shared limits, other protocols and TypeBox, nothing above them.",
      severity: 'error',
      from: { path: '^src/actors/[^/]+/protocol\\.ts$' },
      to: {
        dependencyTypesNot: ['npm', 'core'],
        pathNot: '^src/(runtime|relay-protocol)/|^src/actors/[^/]+/protocol\\.ts$',
      },
    },
    {
      name: 'actor-imports-no-routes-or-frontends',
      comment:
        'An actor folder imports stores and protocols, never what users reach (routes, the frontends, the composition root).',
      severity: 'error',
      from: { path: '^src/actors/' },
      to: { path: '\\.routes\\.ts$|^src/(http|ws|dashboard)/|^src/(app|main)\\.ts$' },
    },
    {
      name: 'actor-imports-no-service',
      comment:
        "An actor runs beneath the features' services (listed above by module): it imports their stores, protocols and pure rules, never a service.",
      severity: 'error',
      from: { path: '^src/actors/' },
      to: { path: services },
    },
    {
      name: 'actor-reaches-actor-through-protocol',
      comment:
        "One actor speaks to another only through that actor's protocol.ts: its state machine and stores are its own. A piece both need goes into the protocol or a module below both.",
      severity: 'error',
      from: { path: '^src/actors/([^/]+)/' },
      to: { path: '^src/actors/[^/]+/', pathNot: '^src/actors/$1/|^src/actors/[^/]+/protocol\\.ts$' },
    },
    {
      name: 'feature-reaches-actor-through-protocol',
      comment:
        'A feature speaks to an actor only through its protocol.ts; the composition root (src/app.ts) builds the actors.',
      severity: 'error',
      from: { path: `${features}|^src/ws/` },
      to: { path: '^src/actors/', pathNot: '^src/actors/[^/]+/protocol\\.ts$' },
    },
    {
      name: 'lower-floors-import-no-feature',
      comment: 'store/, runtime/ and events/ are below every feature: they take what they need as options.',
      severity: 'error',
      from: { path: '^src/(store|runtime|events)/' },
      to: { path: aboveFeatures },
    },
    {
      name: 'http-imports-no-feature',
      comment: 'The HTTP server is plumbing: features hand it their routes through the composition root.',
      severity: 'error',
      from: { path: '^src/http/' },
      to: { path: `${aboveFeatures}|^src/events/` },
    },
    ...onlyImportedBy.map(({ name, comment, importers, module }) => ({
      name,
      comment,
      severity: 'error',
      from: { path: '^src/', pathNot: importers },
      to: { path: `node_modules/${module}/` },
    })),
    {
      name: 'relay-agent-imports-no-server-code',
      comment: 'The relay agent is its own package on a Mac: it shares only the relay protocol with the server.',
      severity: 'error',
      from: { path: '^packages/relay-agent/' },
      to: { path: '^src/', pathNot: '^src/relay-protocol/' },
    },
    {
      name: 'server-imports-no-relay-agent',
      comment: 'The server runs without the agent: src/ imports nothing from packages/.',
      severity: 'error',
      from: { path: '^src/' },
      to: { path: '^packages/' },
    },
    {
      name: 'web-imports-no-server-code',
      comment:
        'The dashboard is built for the browser on its own; it shares only the pure recipient rules with the server.',
      severity: 'error',
      from: { path: '^web/' },
      to: { path: '^src/', pathNot: '^src/messages/recipient-rules\\.ts$' },
    },
  ],
  options: {
    // TypeScript 7 ships no compiler API; SWC parses the sources (type-only imports included).
    parser: 'swc',
    tsPreCompilationDeps: true,
    doNotFollow: { path: 'node_modules' },
    exclude: { path: '\\.d\\.ts$' },
    enhancedResolveOptions: { extensions: ['.ts', '.js', '.mjs', '.json'] },
  },
};
