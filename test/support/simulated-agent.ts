import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import type { TestContext } from 'node:test';
import { createSimulatedChatDb } from '../../packages/relay-agent/src/simulated-messages-app.ts';
import { waitFor } from '../integration/runtime-contract.ts';
import { simulatedAgentArgs, startAgent } from './fake-relay-server.ts';
import type { Org, TestApp } from './test-app.ts';

/**
 * A relay agent in simulator mode, registered for `org` on `app` and online:
 * its chat.db in a directory of its own; killed, and the directory removed,
 * after the test.
 */
export async function startSimulatedAgent(
  t: TestContext,
  app: TestApp,
  org: Org,
  env: Record<string, string> = {},
): Promise<{ chatDb: string; output: () => string }> {
  const dir = await mkdtemp(join(tmpdir(), 'relaybox-agent-'));
  const chatDb = join(dir, 'chat.db');
  await createSimulatedChatDb(chatDb).then((db) => db.close());
  const call = (method: string, path: string) => app.request(method, path, { token: org.ownerToken });
  const token = (await call('POST', `/api/v1/tenants/${org.orgId}/relay-tokens`)).body.token as string;
  const agent = startAgent(
    simulatedAgentArgs(`${app.base.replace('http', 'ws')}/api/v1/relays/connect`, join(dir, 'state'), chatDb),
    { RELAYBOX_TOKEN: token, LOG_LEVEL: 'info', ...env },
  );
  t.after(async () => {
    agent.child.kill('SIGKILL');
    await agent.exited;
    await rm(dir, { recursive: true, force: true });
  });
  await waitFor(
    async () => (await call('GET', '/api/v1/relays')).body.data.some((r: { status: string }) => r.status === 'online'),
    20_000,
    `relay online\n${agent.output()}`,
  );
  return { chatDb, output: agent.output };
}
