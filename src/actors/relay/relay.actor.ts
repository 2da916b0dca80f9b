import { defineActor, type ActorContext, type MessageOfKind } from '../../runtime/actor.ts';
import type { InboundRecorder } from './inbound-recorder.ts';
import { relayProtocol } from './protocol.ts';
import type { RelaySends, SendReport } from './relay-sends.ts';
import type { RelaySessions } from './relay-sessions.ts';
import type { RelayState } from './relay-state.ts';

/** One actor per relay: its session, heartbeat timeout, health, capacity, sends in flight and inbound cursor. */
export function relayActor(
  sessions: RelaySessions,
  sends: RelaySends,
  inbound: InboundRecorder,
  batchReports: boolean,
) {
  return defineActor<typeof relayProtocol, RelayState>(relayProtocol, {
    activate: () => sessions.activate(),
    handlers: {
      connect: (ctx, m) => sessions.connect(ctx, m),
      heartbeat: (ctx, m) => sessions.heartbeat(ctx, m),
      ready: (ctx, m) => sessions.ready(ctx, m),
      disconnect: (ctx, m) => sessions.offline(ctx, m, m.reason),
      'heartbeat-check': (ctx, m) => sessions.heartbeatCheck(ctx, m),
      // Each first loads the document, and with it the sends in flight as the store has them.
      attach: async (ctx, m) => sends.attach(ctx, await sessions.load(ctx, m.tenantId), m),
      deliver: async (ctx, m) => sends.deliver(ctx, await sessions.load(ctx, m.tenantId), m),
      status: (ctx, m) => reportRuns(ctx, sessions, sends, [reportOf(m)]),
      statuses: (ctx, m) => reportRuns(ctx, sessions, sends, reportsOf(m)),
      'send-timeout': async (ctx, m) => {
        await sessions.load(ctx, m.tenantId);
        await sends.sendTimeout(ctx, m.tenantId, [m]);
      },
      'send-timeouts': async (ctx, m) => {
        await sessions.load(ctx, m.tenantId);
        await sends.sendTimeout(ctx, m.tenantId, m.sends);
      },
      'hand-back': async (ctx, m) => sends.handBackStray(ctx, await sessions.load(ctx, m.tenantId), m.tenantId),
      inbound: async (ctx, m) => {
        const { kind: _kind, tenantId, ...report } = m;
        await inbound.record(ctx, tenantId, { relayId: ctx.key, ...report });
      },
      change: async (ctx, m) => {
        const { kind: _kind, tenantId, ...change } = m;
        await inbound.change(tenantId, { relayId: ctx.key, ...change });
      },
    },
    // Reports that waited side by side go on to the tenant actor together.
    batches: batchReports
      ? {
          status: (ctx, ms) => reportRuns(ctx, sessions, sends, ms.map(reportOf)),
          statuses: (ctx, ms) => reportRuns(ctx, sessions, sends, ms.flatMap(reportsOf)),
        }
      : {},
  });
}

type Msg<K extends keyof (typeof relayProtocol)['messages'] & string> = MessageOfKind<typeof relayProtocol, K>;
type TenantReport = SendReport & { tenantId: string };

const reportOf = ({ kind: _kind, ...report }: Msg<'status'>): TenantReport => report;

/** A `statuses`, as the `status` messages it stands for. */
const reportsOf = (m: Msg<'statuses'>): TenantReport[] =>
  m.reports.map((r) => ({ tenantId: m.tenantId, session: m.session, ...r }));

/** Reports of one or more messages, in order: each run of one organization's passed on at once. */
async function reportRuns(
  ctx: ActorContext<RelayState>,
  sessions: RelaySessions,
  sends: RelaySends,
  reports: TenantReport[],
): Promise<void> {
  for (let i = 0; i < reports.length;) {
    const tenantId = reports[i]!.tenantId;
    let end = i + 1;
    while (end < reports.length && reports[end]!.tenantId === tenantId) end++;
    // Loads the document first, and with it the sends in flight as the store has them.
    await sessions.load(ctx, tenantId);
    await sends.reports(
      ctx,
      tenantId,
      reports.slice(i, end).map(({ tenantId: _tenantId, ...r }) => r),
    );
    i = end;
  }
}
