import assert from 'node:assert/strict';
import { test } from 'node:test';
import { jobProtocol } from '../../src/actors/job/protocol.ts';
import { webhookProtocol } from '../../src/actors/webhook/protocol.ts';
import { automationProtocol } from '../../src/actors/automation/protocol.ts';
import { defineProtocol } from '../../src/runtime/actor.ts';
import { MessageValidators, newEnvelope } from '../../src/runtime/envelope.ts';
import { Type } from '@sinclair/typebox';

test('a message written under a former field name is read under the current one, in place', () => {
  const validators = new MessageValidators();
  validators.add(
    defineProtocol('renamed', { ping: { tenantId: Type.String() } }, { formerNames: { orgId: 'tenantId' } }),
  );
  const env = newEnvelope('m1', 'renamed', 'k', { kind: 'ping', orgId: 'org_1' }, undefined);
  assert.equal(validators.problem(env), undefined);
  assert.deepEqual(env.msg, { kind: 'ping', tenantId: 'org_1' });
});

test('without a former name the old spelling is refused, and a message with both names keeps the current one', () => {
  const validators = new MessageValidators();
  validators.add(defineProtocol('strict', { ping: { tenantId: Type.String() } }));
  assert.match(
    validators.problem(newEnvelope('m1', 'strict', 'k', { kind: 'ping', orgId: 'org_1' }, undefined)) ?? '',
    /orgId|tenantId/,
  );
  const both = new MessageValidators();
  both.add(defineProtocol('both', { ping: { tenantId: Type.String() } }, { formerNames: { orgId: 'tenantId' } }));
  const env = newEnvelope('m2', 'both', 'k', { kind: 'ping', tenantId: 'org_2', orgId: 'org_1' }, undefined);
  assert.ok(both.problem(env), 'a message naming the field twice is malformed, not silently merged');
});

test("the job, webhook and automation actors read messages queued before the tenant's rename", () => {
  const validators = new MessageValidators();
  for (const p of [jobProtocol, webhookProtocol, automationProtocol]) validators.add(p);
  const env = newEnvelope('m3', 'webhook', 'wh_1', { kind: 'sweep', orgId: 'org_1' }, undefined);
  assert.equal(validators.problem(env), undefined);
  assert.equal(env.msg.tenantId, 'org_1');
});
