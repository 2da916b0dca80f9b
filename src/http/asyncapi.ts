import type { TSchema } from '@sinclair/typebox';
import { agentFrame, frameLimits, relaySocketPath, serverFrame } from '../relay-protocol/frames.ts';
import { plain } from './openapi-responses.ts';

/** What the frame schemas cannot say: the order of frames and the delivery rules both ends keep. */
const protocolRules = [
  'One JSON object per text frame, each with a `type`; binary frames and frames over ' +
    `${frameLimits.maxFrameBytes} bytes are refused.`,
  'The relay opens with `hello` (a registration token from POST /api/v1/tenants/{tenantId}/relay-tokens the first time, its stored credential afterwards); the server answers `welcome`, or `error` and closes with 4001. No hello within 10 s closes the socket.',
  'The relay sends `heartbeat` every `welcome.heartbeatIntervalMs`; a relay silent past the heartbeat timeout is offline and its unfinished sends go back to the queue.',
  '`ready.capacity` is the credit window: the server keeps at most `capacity` sends unfinished on one connection; a send is finished once the relay reports `sent` or `failed` (or a `delivered` or `read` that comes first). The relay repeats `ready` whenever a send finishes.',
  'A `send` delivered again (a redelivered frame, a reconnect) is never sent twice; the relay re-reports its statuses instead.',
  'Each `status` is acknowledged with `ack {of: "status"}`; unacknowledged statuses are sent again after a reconnect.',
  '`inbound` rows are at-least-once: the relay sends every row after `welcome.inboundCursor` and moves its cursor on `ack {of: "inbound"}`; the server drops repeats by `guid`.',
  'A `checkSent` (agents from 0.4) is answered by one `sentCheck` with its `checkId`: whether this Apple ID sent that text to that recipient since `since`, as the relay\'s chat.db has it. It is asked before a standby sends a message its line\'s primary held when it went offline (docs/relay-agent.md, "Standby relays"); no answer within a few seconds leaves the message waiting.',
  'A malformed frame is answered with `error {code: "validation_error"}`; after 5 the socket is closed with 1008.',
];

type FrameUnion = TSchema & { anyOf: TSchema[] };

function framesOf(union: FrameUnion): Array<[string, Record<string, any>]> {
  return union.anyOf.map((member) => {
    const schema = plain(member);
    const type = schema.properties?.type?.const as string;
    return [type, schema];
  });
}

/**
 * The relay WebSocket protocol in AsyncAPI 3.0, from the server's side:
 * it receives the agent's frames and sends its own. Generated from the frame
 * schemas of src/relay-protocol, so a new frame is described by adding it there.
 */
export function asyncApiDocument() {
  const received = framesOf(agentFrame as FrameUnion);
  const sent = framesOf(serverFrame as FrameUnion);
  const messages: Record<string, unknown> = {};
  for (const [type, payload] of [...received, ...sent]) {
    messages[type] = { name: type, title: `${type} frame`, contentType: 'application/json', payload };
  }
  const channelMessages = Object.fromEntries(
    Object.keys(messages).map((type) => [type, { $ref: `#/components/messages/${type}` }]),
  );
  const operation = (action: 'send' | 'receive', types: string[], summary: string) => ({
    action,
    summary,
    channel: { $ref: '#/channels/relay' },
    // The relay authenticates inside the protocol (the hello frame), not at the transport.
    security: [],
    messages: types.map((type) => ({ $ref: `#/channels/relay/messages/${type}` })),
  });
  return {
    asyncapi: '3.0.0',
    info: {
      title: 'Relaybox relay protocol',
      version: '1.0.0',
      description: [
        'The WebSocket between a desktop relay and the Relaybox server.',
        '',
        "Test data (test keys) is sent by a relay built into the server that speaks these frames' statuses and inbound rows without a socket: no agent connects for it (docs/test-mode.md).",
        '',
        ...protocolRules.map((r) => `- ${r}`),
      ].join('\n'),
    },
    defaultContentType: 'application/json',
    channels: {
      relay: {
        address: relaySocketPath,
        title: 'Relay connection',
        description: 'One connection per relay, opened by the relay (ws:// or wss:// on the API host).',
        messages: channelMessages,
      },
    },
    operations: {
      receiveAgentFrames: operation(
        'receive',
        received.map(([t]) => t),
        'Frames a relay sends to the server',
      ),
      sendServerFrames: operation(
        'send',
        sent.map(([t]) => t),
        'Frames the server sends to a relay',
      ),
    },
    components: { messages },
  };
}
