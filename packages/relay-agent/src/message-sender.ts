/**
 * The one seam between the agent and whatever actually sends: the Messages app
 * through AppleScript on a Mac, or the simulator on any machine.
 */
export interface OutgoingMessage {
  messageId: string;
  attempt: number;
  /** Phone number or email address of the recipient. */
  to: string;
  /** Empty when the message is attachments only. */
  body: string;
  /** Local POSIX paths of files already downloaded. */
  attachmentPaths: string[];
  /** `SMS`: send over the SMS service (the Mac's text message forwarding) instead of iMessage. */
  service?: 'SMS';
}

/** An expected failure is a value; a thrown error is a bug in the agent. */
export type SendOutcome = { ok: true } | { ok: false; error: string };

export interface MessageSender {
  send(message: OutgoingMessage): Promise<SendOutcome>;
  /** Quits and reopens Messages when it stopped writing the rows of its sends. */
  restart(): Promise<SendOutcome | void>;
  /** Which service a handle is reached on, when the sender itself can tell (the simulator's rule); otherwise the agent reads chat.db's history. */
  availability?(handle: string): Promise<{ imessage: boolean | null; source: string }>;
}

/**
 * The form Messages stores a handle in (`handle.id`): emails lowercased, phone
 * numbers reduced to digits with an optional leading `+`. Matching a send to
 * its chat.db row compares these forms, so "+1 (555) 123-4567" finds "+15551234567".
 */
export function normalizeHandle(handle: string): string {
  const trimmed = handle.trim();
  if (trimmed.includes('@')) return trimmed.toLowerCase();
  const digits = trimmed.replace(/[^\d]/g, '');
  return trimmed.startsWith('+') ? `+${digits}` : digits;
}

/** Message text as compared for matching: line endings and surrounding space do not count. */
export function normalizeBody(text: string): string {
  return text.replace(/\r\n?/g, '\n').trim();
}

export type Availability = { imessage: boolean | null; source: string };

/** Which service a handle is reached on: the sender's own rule (the simulator), else the newest chat.db message with it. */
export async function availabilityOf(
  sender: MessageSender,
  history: { lastService(handle: string): Promise<string | undefined> },
  to: string,
): Promise<Availability> {
  const handle = normalizeHandle(to);
  if (sender.availability) return sender.availability(handle);
  const service = await history.lastService(handle);
  return { imessage: service === undefined ? null : service === 'iMessage', source: 'history' };
}

/** A send goes as SMS when the server says so, or when its fallback asks for it and the handle is known to have no iMessage. */
export async function sendsAsSms(
  frame: { to: string; service?: 'SMS'; fallback?: { sms: 'if_not_imessage' } },
  availability: (to: string) => Promise<Availability>,
): Promise<boolean> {
  if (frame.service === 'SMS') return true;
  if (frame.fallback?.sms !== 'if_not_imessage') return false;
  return (await availability(frame.to)).imessage === false;
}
