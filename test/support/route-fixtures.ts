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
const message = async (t: TestApp, org: Org) => ({ params: { id: (await created(t, org, '/api/v1/messages', { to: '+14155550123', body: 'fixture', attachments: ['https://cdn.example.com/f.png'] })).id } });
let numberSeq = 0;
const phoneNumber = async (t: TestApp, org: Org) => ({ params: { id: (await created(t, org, '/api/v1/phone-numbers', { number: `+1415555${String(1000 + (numberSeq++ % 9000)).padStart(4, '0')}` })).id } });

export const routeFixtures: Record<string, RouteFixture> = {
  'DELETE /api/v1/api-keys/:id': async (t, org) => ({ params: { id: (await created(t, org, '/api/v1/api-keys', { name: 'fixture' })).id } }),
  'GET /api/v1/messages/:id/status': message,
  'GET /api/v1/messages/:id/attachments': message,
  'GET /api/v1/conversations/:id': async (t, org) => {
    const sent = await created(t, org, '/api/v1/messages', { to: '+14155550124', body: 'fixture' });
    return { params: { id: sent.conversationId } };
  },
  'PUT /api/v1/phone-numbers/:id': async (t, org) => ({ ...(await phoneNumber(t, org)), body: { label: 'fixture' } }),
  'DELETE /api/v1/phone-numbers/:id': phoneNumber,
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
  'PUT /api/v1/contacts/:id': async (t, org) => ({ params: { id: (await contact(t, org)).id }, body: { notes: 'fixture update' } }),
  'DELETE /api/v1/contacts/:id': async (t, org) => ({ params: { id: (await contact(t, org)).id } }),
  'GET /api/v1/contact-groups/:id': async (t, org) => ({ params: { id: (await contactGroup(t, org)).id } }),
  'POST /api/v1/contact-groups/:id/members': async (t, org) => ({ params: { id: (await contactGroup(t, org)).id }, body: { contactId: (await contact(t, org)).id } }),
  'DELETE /api/v1/contact-groups/:id/members/:contactId': async (t, org) => {
    const group = await contactGroup(t, org);
    const member = await contact(t, org);
    const added = await t.request('POST', `/api/v1/contact-groups/${group.id}/members`, { token: org.ownerToken, body: { contactId: member.id } });
    if (added.status !== 201) throw new Error(`fixture add member: ${added.status} ${added.text}`);
    return { params: { id: group.id, contactId: member.id } };
  },
};

const contact = (t: TestApp, org: Org) => created(t, org, '/api/v1/contacts', { firstName: 'Fixture', phoneNumbers: ['+15550000001'] });
const contactGroup = (t: TestApp, org: Org) => created(t, org, '/api/v1/contact-groups', { name: 'Fixture group' });

export { created };
