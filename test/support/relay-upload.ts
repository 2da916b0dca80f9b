import assert from 'node:assert/strict';
import { recordAnswer } from './answer-recorder.ts';
import { RelaySocket } from './relay-socket.ts';
import type { Org, TestApp } from './test-app.ts';

export interface UploadingRelay {
  socket: RelaySocket;
  /** `Bearer <relayId>:<secret>`: what the relay's uploads carry. */
  authorization: string;
  /** Sends an inbound row with these files (`guid`, `name`) and waits for its ack; answers the received message's id. */
  receive(rowId: number, files: Array<{ guid: string; name: string; size?: number }>, extra?: object): Promise<string>;
  /** PUTs `body` as the attachment `guid` (recorded for the API contract); answers status and parsed body. */
  upload(
    guid: string,
    body: Buffer | ReadableStream<Uint8Array> | undefined,
    headers?: Record<string, string>,
  ): Promise<{ status: number; body: any }>;
}

/** A relay of `org` registered over a bare protocol socket, which receives rows with files and uploads them. */
export async function uploadingRelay(app: TestApp, org: Org): Promise<UploadingRelay> {
  const token = await app.request('POST', `/api/v1/tenants/${org.orgId}/relay-tokens`, { token: org.ownerToken });
  assert.equal(token.status, 201, token.text);
  const socket = await RelaySocket.open(app.base);
  socket.hello({ registrationToken: token.body.token });
  const welcome = await socket.next('welcome', undefined, 15_000);
  const credential = welcome.credential!;
  const authorization = `Bearer ${credential.relayId}:${credential.secret}`;
  return {
    socket,
    authorization,
    async receive(rowId, files, extra = {}) {
      const guid = `ROW-${rowId}-${Math.random().toString(36).slice(2)}`;
      socket.send({
        type: 'inbound',
        rowId,
        guid,
        from: '+14155550188',
        isGroup: false,
        body: `row ${rowId}`,
        receivedAt: new Date().toISOString(),
        files,
        ...extra,
      });
      await socket.next('ack', (a) => a.of === 'inbound' && (a.cursor ?? 0) >= rowId, 15_000);
      const list = await app.request('GET', '/api/v1/messages?direction=received&limit=100', {
        token: org.ownerToken,
      });
      const found = (list.body.data as Array<{ id: string; body: string }>).find((m) => m.body === `row ${rowId}`);
      assert.ok(found, `the message of row ${rowId} is stored`);
      return found.id;
    },
    async upload(guid, body, headers = {}) {
      const path = `/api/v1/relay/attachments/${encodeURIComponent(guid)}`;
      const res = await fetch(`${app.base}${path}`, {
        method: 'PUT',
        headers: { authorization, 'content-type': 'application/octet-stream', ...headers },
        body,
        ...(body instanceof ReadableStream ? { duplex: 'half' } : {}),
      } as RequestInit);
      const text = await res.text();
      const parsed = text ? (JSON.parse(text) as unknown) : undefined;
      recordAnswer({
        method: 'PUT',
        path,
        status: res.status,
        contentType: res.headers.get('content-type'),
        body: parsed,
        text,
      });
      return { status: res.status, body: parsed };
    },
  };
}
