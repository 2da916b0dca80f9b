import { RelaySocket } from './relay-socket.ts';
import type { Org, TestApp } from './test-app.ts';

/** What one route needs to be called on a real resource of `org`: its path params and, for writes, a valid body. */
export type RouteFixture = (t: TestApp, org: Org) => Promise<{ params: Record<string, string>; body?: unknown }>;

async function created(t: TestApp, org: Org, path: string, body: unknown): Promise<any> {
  const res = await t.request('POST', path, { token: org.ownerToken, body });
  if (res.status !== 201) throw new Error(`fixture POST ${path}: ${res.status} ${res.text}`);
  return res.body;
}

/**
 * One entry per route with an id, keyed "METHOD /path". The route matrices
 * fail for a route that has none, so every new route is covered.
 */
const message = async (t: TestApp, org: Org) => ({
  params: {
    id: (
      await created(t, org, '/api/v1/messages', {
        to: '+14155550123',
        body: 'fixture',
        attachments: ['https://cdn.example.com/f.png'],
      })
    ).id,
  },
});
let numberSeq = 0;
let lookupSeq = 0;
const phoneNumber = async (t: TestApp, org: Org) => ({
  params: {
    id: (
      await created(t, org, '/api/v1/phone-numbers', {
        number: `+1415555${String(1000 + (numberSeq++ % 9000)).padStart(4, '0')}`,
      })
    ).id,
  },
});

let memberSeq = 0;
let suppressionSeq = 0;
const member = async (t: TestApp, org: Org) => ({
  params: {
    id: (
      await created(t, org, '/api/v1/members', {
        email: `fixture-${Date.now()}-${memberSeq++}@example.com`,
        password: 'fixture password',
        role: 'member',
      })
    ).id,
  },
});

const bulkJob = async (t: TestApp, org: Org) => ({
  params: {
    jobId: (
      await created(t, org, '/api/v1/messages/bulk', {
        messages: [{ to: '+14155550125', body: 'fixture' }],
        scheduledAt: new Date(Date.now() + 3600_000).toISOString(),
      })
    ).jobId,
  },
});

export const routeFixtures: Record<string, RouteFixture> = {
  'GET /api/v1/messages/bulk/:jobId': bulkJob,
  'GET /api/v1/messages/bulk/:jobId/results': bulkJob,
  'POST /api/v1/messages/bulk/:jobId/cancel': bulkJob,
  'DELETE /api/v1/api-keys/:id': async (t, org) => ({
    params: { id: (await created(t, org, '/api/v1/api-keys', { name: 'fixture' })).id },
  }),
  'PATCH /api/v1/members/:id': async (t, org) => ({ ...(await member(t, org)), body: { role: 'viewer' } }),
  'DELETE /api/v1/members/:id': member,
  'GET /api/v1/messages/:id': message,
  'GET /api/v1/messages/:id/status': message,
  'GET /api/v1/messages/:id/attachments': message,
  'GET /api/v1/conversations/:id': async (t, org) => {
    const sent = await created(t, org, '/api/v1/messages', { to: '+14155550124', body: 'fixture' });
    return { params: { id: sent.conversationId } };
  },
  'PUT /api/v1/phone-numbers/:id': async (t, org) => ({ ...(await phoneNumber(t, org)), body: { label: 'fixture' } }),
  'DELETE /api/v1/phone-numbers/:id': phoneNumber,
  'GET /api/v1/phone-numbers/:id/usage': phoneNumber,
  // A relay online that answers every lookup it is asked (its socket closes a few seconds later): a route called
  // many times over (the hostile requests) may ask it more than once while it is the organization's relay.
  'GET /api/v1/handles/:handle/availability': async (t, org) => {
    const { token } = await created(t, org, `/api/v1/tenants/${org.orgId}/relay-tokens`, {});
    const socket = await RelaySocket.open(t.base);
    socket.hello({ registrationToken: token });
    await socket.next('welcome');
    let answered = 0;
    const answering = setInterval(() => {
      const lookups = socket.frames.filter((f) => f.type === 'lookup');
      for (const f of lookups.slice(answered))
        socket.send({ type: 'availability', lookupId: f.lookupId, imessage: true, source: 'history' });
      answered = lookups.length;
    }, 10);
    setTimeout(() => (clearInterval(answering), socket.close()), 3_000);
    return { params: { handle: `+1415555${String(1000 + (lookupSeq++ % 9000)).padStart(4, '0')}` } };
  },
  'POST /api/v1/tenants/:tenantId/relay-tokens': async (_t, org) => ({ params: { tenantId: org.orgId }, body: {} }),
  'GET /api/v1/relays/:id': async (t, org) => {
    const { token } = await created(t, org, `/api/v1/tenants/${org.orgId}/relay-tokens`, {});
    const socket = await RelaySocket.open(t.base);
    socket.hello({ registrationToken: token });
    const welcome = await socket.next('welcome');
    socket.close();
    return { params: { id: welcome.relayId } };
  },
  'GET /api/v1/contacts/:id': async (t, org) => ({ params: { id: (await contact(t, org)).id } }),
  'PUT /api/v1/contacts/:id': async (t, org) => ({
    params: { id: (await contact(t, org)).id },
    body: { notes: 'fixture update' },
  }),
  'DELETE /api/v1/contacts/:id': async (t, org) => ({ params: { id: (await contact(t, org)).id } }),
  'GET /api/v1/contact-groups/:id': async (t, org) => ({ params: { id: (await contactGroup(t, org)).id } }),
  'POST /api/v1/contact-groups/:id/members': async (t, org) => ({
    params: { id: (await contactGroup(t, org)).id },
    body: { contactId: (await contact(t, org)).id },
  }),
  'DELETE /api/v1/contact-groups/:id/members/:contactId': async (t, org) => {
    const group = await contactGroup(t, org);
    const member = await contact(t, org);
    const added = await t.request('POST', `/api/v1/contact-groups/${group.id}/members`, {
      token: org.ownerToken,
      body: { contactId: member.id },
    });
    if (added.status !== 201) throw new Error(`fixture add member: ${added.status} ${added.text}`);
    return { params: { id: group.id, contactId: member.id } };
  },
  'GET /api/v1/webhooks/:id': async (t, org) => ({ params: { id: await webhook(t, org) } }),
  'PUT /api/v1/webhooks/:id': async (t, org) => ({
    params: { id: await webhook(t, org) },
    body: { events: ['message.sent'] },
  }),
  'DELETE /api/v1/webhooks/:id': async (t, org) => ({ params: { id: await webhook(t, org) } }),
  'PATCH /api/v1/webhooks/:id/toggle': async (t, org) => ({ params: { id: await webhook(t, org) }, body: {} }),
  'POST /api/v1/webhooks/:id/rotate-secret': async (t, org) => ({ params: { id: await webhook(t, org) }, body: {} }),
  'GET /api/v1/webhooks/:id/deliveries': async (t, org) => ({ params: { id: await webhook(t, org) } }),
  'POST /api/v1/webhooks/:id/test': async (t, org) => ({ params: { id: await webhook(t, org) }, body: {} }),
  'POST /api/v1/webhooks/:id/deliveries/:deliveryId/retry': async (t, org) => {
    const id = await webhook(t, org);
    const tested = await t.request('POST', `/api/v1/webhooks/${id}/test`, { token: org.ownerToken, body: {} });
    if (tested.status !== 200) throw new Error(`fixture webhook test: ${tested.status} ${tested.text}`);
    return { params: { id, deliveryId: tested.body.id }, body: {} };
  },
  'DELETE /api/v1/suppressions/:handle': async (t, org) => ({
    params: {
      handle: (
        await created(t, org, '/api/v1/suppressions', {
          handle: `+1415556${String(1000 + (suppressionSeq++ % 9000)).padStart(4, '0')}`,
        })
      ).handle,
    },
  }),
  'GET /api/v1/automations/:id': async (t, org) => ({ params: { id: await automation(t, org) } }),
  'PUT /api/v1/automations/:id': async (t, org) => ({ params: { id: await automation(t, org) }, body: automationBody }),
  'DELETE /api/v1/automations/:id': async (t, org) => ({ params: { id: await automation(t, org) } }),
  'PATCH /api/v1/automations/:id/toggle': async (t, org) => ({ params: { id: await automation(t, org) }, body: {} }),
  'POST /api/v1/automations/:id/test': async (t, org) => ({
    params: { id: await automation(t, org) },
    body: { message: { body: 'STOP', from: '+14155550100' } },
  }),
  'GET /api/v1/automations/:id/executions': async (t, org) => ({ params: { id: await automation(t, org) } }),
};

/** An automation that only creates contacts: the matrices make no outbound request and send nothing. */
const automationBody = {
  name: 'Fixture',
  trigger: 'message_received',
  actions: [{ type: 'create_contact', config: {} }],
};
const automation = async (t: TestApp, org: Org): Promise<string> =>
  (await created(t, org, '/api/v1/automations', automationBody)).id;

/**
 * A webhook whose stored URL is then pointed at a loopback address: the guard
 * refuses every attempt to it, so the matrices make no outbound request.
 */
async function webhook(t: TestApp, org: Org): Promise<string> {
  const { id } = await created(t, org, '/api/v1/webhooks', {
    url: 'https://93.184.216.34/hook',
    events: ['message.sent'],
  });
  await t.app.store
    .collection('webhooks')
    .updateOne({ tenantId: org.orgId }, { id }, { $set: { url: 'http://127.0.0.1:9/hook' } });
  return id;
}

const contact = (t: TestApp, org: Org) =>
  created(t, org, '/api/v1/contacts', { firstName: 'Fixture', phoneNumbers: ['+4915150000001'] });
const contactGroup = (t: TestApp, org: Org) => created(t, org, '/api/v1/contact-groups', { name: 'Fixture group' });

export { created };
