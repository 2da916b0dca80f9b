/**
 * The relay's attachment upload endpoint, spoken to as a bare protocol
 * client: only a relay's own credential uploads, only its organization's
 * attachments; a repeat stores nothing twice; a body past the limit without
 * a Content-Length is cut off (413) and its attachment fails; a file the
 * relay cannot send fails with its reason; an agent older than 0.4, which
 * sends paths, leaves only the names. Both backends.
 */
import assert from 'node:assert/strict';
import { createHash, randomBytes } from 'node:crypto';
import { describe, test } from 'node:test';
import { uploadingRelay } from '../support/relay-upload.ts';
import { eachBackend, signup, startTestApp } from '../support/test-app.ts';

const kb = 1024;

eachBackend((backend) => {
  describe(`relay attachment uploads (${backend})`, () => {
    test('a relay uploads its own attachments once, within the limit, and the API serves them', async (t) => {
      const app = await startTestApp(backend, { ATTACHMENT_MAX_BYTES: String(512 * kb) });
      t.after(() => app.stop());
      const [org, other] = [await signup(app, 'Uploads'), await signup(app, 'Elsewhere')];
      const relay = await uploadingRelay(app, org);
      const stranger = await uploadingRelay(app, other);
      t.after(() => (relay.socket.close(), stranger.socket.close()));
      const list = async (id: string) =>
        (await app.request('GET', `/api/v1/messages/${id}/attachments`, { token: org.ownerToken })).body.data;

      const messageId = await relay.receive(1, [
        { guid: 'AT-PIC', name: 'pic.png', size: 100 * kb },
        { guid: 'AT-BIG', name: 'big.bin' },
        { guid: 'AT-GONE', name: 'gone.txt' },
      ]);
      assert.deepEqual(
        (await list(messageId)).map((a: any) => [a.filename, a.status, a.url]),
        [
          ['pic.png', 'pending', null],
          ['big.bin', 'pending', null],
          ['gone.txt', 'pending', null],
        ],
      );

      const bytes = randomBytes(100 * kb);
      // Not a relay's credential, another organization's relay, an unknown guid.
      assert.equal((await relay.upload('AT-PIC', bytes, { authorization: 'Bearer rb_live_nope' })).status, 401);
      assert.equal((await stranger.upload('AT-PIC', bytes)).status, 404);
      assert.equal((await relay.upload('AT-NOBODY', bytes)).status, 404);
      const stored = await relay.upload('AT-PIC', bytes);
      assert.equal(stored.status, 200, JSON.stringify(stored.body));
      assert.deepEqual(stored.body, { id: stored.body.id, status: 'ready', size: 100 * kb });
      // A repeat is answered as stored, without storing anything (a different body would show).
      assert.deepEqual((await relay.upload('AT-PIC', randomBytes(10))).body, stored.body);

      // Past the limit with no Content-Length (chunked): cut off, failed with the reason, refused after.
      const chunks = new ReadableStream<Uint8Array>({
        start(controller) {
          for (let i = 0; i < 12; i++) controller.enqueue(randomBytes(64 * kb));
          controller.close();
        },
      });
      assert.equal((await relay.upload('AT-BIG', chunks)).status, 413);
      assert.equal((await relay.upload('AT-BIG', randomBytes(10))).status, 409);
      // The relay cannot send it: failed with its reason.
      const gone = await relay.upload('AT-GONE', undefined, { 'x-relaybox-unavailable': 'not on the Mac' });
      assert.equal(gone.body.status, 'failed');

      const [pic, big, missing] = await list(messageId);
      assert.equal(pic.status, 'ready');
      assert.equal(big.status, 'failed');
      assert.match(big.reason, /larger than 524288 bytes/);
      assert.equal(missing.reason, 'not on the Mac');
      const download = await fetch(pic.url);
      assert.equal(download.status, 200);
      assert.equal(download.headers.get('content-type'), 'image/png');
      const got = Buffer.from(await download.arrayBuffer());
      assert.equal(createHash('sha256').update(got).digest('hex'), createHash('sha256').update(bytes).digest('hex'));
      // A link that is not one the service signed is refused.
      const forged = new URL(pic.url);
      forged.pathname = forged.pathname.replace(/[^/]+$/, 'x.y');
      assert.equal((await fetch(forged)).status, 403);

      // An agent older than 0.4 sends paths: the names are kept, the paths nowhere, the files failed.
      const legacyId = await relay.receive(2, [], {
        files: undefined,
        attachments: ['/Users/jane/Library/Messages/Attachments/ab/cd/IMG_1.HEIC'],
      });
      const legacy = await app.request('GET', `/api/v1/messages/${legacyId}`, { token: org.ownerToken });
      assert.deepEqual(legacy.body.attachments, ['IMG_1.HEIC']);
      const [old] = await list(legacyId);
      assert.equal(old.status, 'failed');
      assert.match(old.reason, /older than 0\.4/);
      assert.ok(!JSON.stringify([legacy.body, old]).includes('/Users/jane'));

      // A message stored before attachments were uploaded kept the paths, and has no attachment records: names only.
      const scope = { tenantId: org.orgId };
      await app.app.store.collection('attachments').deleteMany(scope, { messageId: legacyId });
      await app.app.store
        .collection('messages')
        .updateOne(scope, { id: legacyId }, { $set: { attachments: ['/Users/jane/Pictures/old.jpg'] } });
      const [before] = await list(legacyId);
      assert.deepEqual([before.filename, before.status, before.url], ['old.jpg', 'failed', null]);
      const shown = await app.request('GET', `/api/v1/messages/${legacyId}`, { token: org.ownerToken });
      assert.deepEqual(shown.body.attachments, ['old.jpg']);
    });
  });
});
