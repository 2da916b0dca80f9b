import assert from 'node:assert/strict';
import { test } from 'node:test';
import { AttachmentLinks } from '../../src/messages/attachment-links.ts';

test('an attachment link verifies for one hour, then not; another secret never verifies it', () => {
  let now = Date.parse('2026-01-01T00:00:00Z');
  const links = new AttachmentLinks(Buffer.from('secret one'), () => now);
  const [entry] = links.entries('https://api.example.com', 'org_1', 'msg_1', ['https://cdn.example.com/x/report.pdf']);
  const token = entry!.url.split('/attachments/')[1]!;
  assert.deepEqual(links.verify(token), { o: 'org_1', m: 'msg_1', i: 0, e: Math.floor((now + 3600_000) / 1000) });
  assert.equal(entry!.expiresAt, '2026-01-01T01:00:00.000Z');
  assert.equal(new AttachmentLinks(Buffer.from('secret two'), () => now).verify(token), undefined);
  now += 3600_000 - 1000;
  assert.ok(links.verify(token), 'still valid just before the hour');
  now += 1000;
  assert.equal(links.verify(token), undefined, 'expired after one hour');
  assert.equal(links.verify('garbage'), undefined);
  assert.equal(links.verify('a.b.c'), undefined);
});
