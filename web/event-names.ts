/** As `eventNames` (src/events/event-stream.ts), which the browser bundle cannot import; a unit test keeps them equal. */
export const webhookEvents = [
  'message.queued',
  'message.sent',
  'message.delivered',
  'message.read',
  'message.failed',
  'message.undelivered',
  'message.received',
  'message.checkpoint',
  'message.reaction',
  'message.edited',
  'message.unsent',
  'conversation.updated',
  'relay.online',
  'relay.offline',
  'contact.opted_out',
  'contact.opted_in',
] as const;
