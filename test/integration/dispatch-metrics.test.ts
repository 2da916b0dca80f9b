import assert from 'node:assert/strict';
import { test } from 'node:test';
import { setTimeout as sleep } from 'node:timers/promises';
import { StandInRelay } from '../support/stand-in-relay.ts';
import { eachBackend, signup, startTestApp, type TestApp } from '../support/test-app.ts';
import { waitFor } from './runtime-contract.ts';

/** The value of one series of a scrape; undefined when it is not there. */
async function series(t: TestApp, name: string, labels = ''): Promise<number | undefined> {
  const text = (await t.request('GET', '/metrics')).text;
  const line = text.split('\n').find((l) => l.startsWith(labels ? `${name}{${labels}} ` : `${name} `));
  return line === undefined ? undefined : Number(line.split(' ').at(-1));
}

eachBackend((backend) => {
  test(`${backend}: the send queue's size and oldest age by priority band, organizations waiting for a relay, relay capacity and its use, event-stream lag`, async (ctx) => {
    const t = await startTestApp(backend, { TENANT_SWEEP_MS: '300' });
    const relays: StandInRelay[] = [];
    ctx.after(async () => {
      for (const r of relays) r.close();
      await t.stop();
    });
    const org = await signup(t);
    // The histograms belong to the process (both backends run in it): compared as differences.
    const latencySum = () => series(t, 'relaybox_message_latency_seconds_sum', 'to="sent"').then((v) => v ?? 0);
    const waitSum = () => series(t, 'relaybox_message_send_wait_seconds_sum').then((v) => v ?? 0);
    const waitCount = () => series(t, 'relaybox_message_send_wait_seconds_count').then((v) => v ?? 0);
    const [latencyBefore, waitBefore, countBefore] = [await latencySum(), await waitSum(), await waitCount()];
    const ids: string[] = [];
    for (const priority of [0, 0, 80]) {
      const sent = await t.request('POST', '/api/v1/messages', {
        token: org.ownerToken,
        body: { to: '+14155550100', body: `p${priority}`, priority },
      });
      assert.equal(sent.status, 201, sent.text);
      ids.push(sent.body.id as string);
    }
    await waitFor(async () => (await series(t, 'relaybox_queue_messages')) === 3, 10_000, 'three queued');
    await sleep(1_100);
    assert.equal(
      await series(t, 'relaybox_tenants_waiting_for_relay'),
      1,
      'one organization with queued messages and no relay',
    );
    assert.ok(
      (await series(t, 'relaybox_queue_oldest_message_age_seconds', 'band="0"'))! >= 1,
      'the default band has waited',
    );
    assert.ok(
      (await series(t, 'relaybox_queue_oldest_message_age_seconds', 'band="67-100"'))! >= 1,
      'the high band has waited',
    );
    assert.equal(
      await series(t, 'relaybox_queue_oldest_message_age_seconds', 'band="1-33"'),
      0,
      'nothing waits in the others',
    );
    assert.equal(await series(t, 'relaybox_relay_send_capacity'), 0);

    const relay = new StandInRelay(t, org.orgId, org.teamId, { capacity: 2 });
    relays.push(relay);
    await relay.connect();
    await waitFor(() => relay.sends.length === 2, 10_000, 'two handed to the relay');
    assert.equal(relay.sends[0]!.messageId, ids[2], 'the high priority first');
    await waitFor(async () => (await series(t, 'relaybox_relay_sends_in_flight')) === 2, 10_000, 'two in flight');
    assert.equal(await series(t, 'relaybox_relay_send_capacity'), 2);
    assert.equal(await series(t, 'relaybox_tenants_waiting_for_relay'), 0, 'a relay is online');
    assert.equal(await series(t, 'relaybox_queue_messages'), 1);
    assert.equal(await series(t, 'relaybox_queue_oldest_message_age_seconds', 'band="67-100"'), 0);

    for (const send of relay.sends) await relay.report(send.messageId, 'sent');
    await waitFor(() => relay.sends.length === 3, 10_000, 'the third handed over');
    await relay.report(relay.sends[2]!.messageId, 'sent');
    await waitFor(async () => (await series(t, 'relaybox_relay_sends_in_flight')) === 0, 10_000, 'none in flight');
    assert.equal(await series(t, 'relaybox_queue_messages'), 0);
    assert.equal(await series(t, 'relaybox_queue_oldest_message_age_seconds', 'band="0"'), 0);
    // The delivery SLO's clock: the second and more each message waited with no relay online are not counted.
    // The relay actor frees the credit as it passes the report on: the tenant actor records the send a moment later.
    await waitFor(async () => (await waitCount()) - countBefore === 3, 10_000, 'three send waits observed');
    const excluded = (await latencySum()) - latencyBefore - ((await waitSum()) - waitBefore);
    assert.ok(excluded >= 3 * 1.0, `time with no relay online left out of the send wait: ${excluded} s for 3 messages`);
    // Every consumer group of the event stream catches up with the sends' events.
    await waitFor(
      async () => (await series(t, 'relaybox_event_stream_pending_events', 'group="webhooks"')) === 0,
      10_000,
      'webhooks caught up',
    );
    assert.equal(await series(t, 'relaybox_event_stream_oldest_pending_age_seconds', 'group="webhooks"'), 0);
    assert.notEqual(await series(t, 'relaybox_event_stream_pending_events', 'group="automations"'), undefined);
  });
});
