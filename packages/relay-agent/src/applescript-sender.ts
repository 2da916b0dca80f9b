import { spawn as nodeSpawn, type ChildProcess } from 'node:child_process';
import type { MessageSender, OutgoingMessage, SendOutcome } from './message-sender.ts';

/**
 * The script never changes: recipient, text and file paths reach it only as
 * argv items of its run handler, so no message content is ever parsed as
 * AppleScript. It is fed on stdin (`osascript -`), which also means the first
 * positional argument is `-` and osascript stops reading options there: a body
 * that starts with "-e" is still just text.
 */
export const sendScript = `on run argv
  set recipientHandle to item 1 of argv
  set messageText to item 2 of argv
  tell application "Messages"
    set targetService to 1st account whose service type = iMessage
    set targetBuddy to participant recipientHandle of targetService
    if messageText is not "" then send messageText to targetBuddy
    repeat with i from 3 to (count of argv)
      send (POSIX file (item i of argv)) to targetBuddy
    end repeat
  end tell
end run
`;

/** The same script over the SMS service: Messages sends it through the iPhone's text message forwarding. */
export const smsScript = sendScript.replace('service type = iMessage', 'service type = SMS');

export type SpawnFunction = (
  command: string,
  args: string[],
  options: { stdio: ['pipe', 'ignore', 'pipe'] },
) => ChildProcess;

export interface AppleScriptSenderOptions {
  /** Default `/usr/bin/osascript`; tests point this at a fake that records its argv. */
  osascriptPath?: string;
  spawn?: SpawnFunction;
  /** Messages can hang on a bad recipient; the run is killed after this. */
  timeoutMs?: number;
}

const maxStderrBytes = 8 * 1024;

export class AppleScriptSender implements MessageSender {
  private readonly osascriptPath: string;
  private readonly spawn: SpawnFunction;
  private readonly timeoutMs: number;

  constructor(options: AppleScriptSenderOptions = {}) {
    this.osascriptPath = options.osascriptPath ?? '/usr/bin/osascript';
    this.spawn = options.spawn ?? ((command, args, opts) => nodeSpawn(command, args, opts));
    this.timeoutMs = options.timeoutMs ?? 60_000;
  }

  /** The exact argv given to osascript: constant script source, then plain data items. */
  static argv(message: Pick<OutgoingMessage, 'to' | 'body' | 'attachmentPaths'>): string[] {
    return ['-', message.to, message.body, ...message.attachmentPaths];
  }

  send(message: OutgoingMessage): Promise<SendOutcome> {
    return this.run(AppleScriptSender.argv(message), message.service === 'SMS' ? smsScript : sendScript);
  }

  /** Quits Messages and opens it again, for a Messages app that stopped sending. */
  restart(): Promise<SendOutcome> {
    return this.run(['-'], restartScript);
  }

  private run(argv: string[], script: string): Promise<SendOutcome> {
    return new Promise((done) => {
      let child: ChildProcess;
      try {
        child = this.spawn(this.osascriptPath, argv, { stdio: ['pipe', 'ignore', 'pipe'] });
      } catch (err) {
        done({ ok: false, error: `cannot start osascript: ${(err as Error).message}` });
        return;
      }
      let stderr = '';
      let settled = false;
      const finish = (outcome: SendOutcome) => {
        if (settled) return;
        settled = true;
        clearTimeout(timer);
        done(outcome);
      };
      const timer = setTimeout(() => {
        child.kill('SIGKILL');
        finish({ ok: false, error: `osascript did not finish within ${this.timeoutMs} ms` });
      }, this.timeoutMs);
      child.stderr?.setEncoding('utf8');
      child.stderr?.on('data', (chunk: string) => {
        if (stderr.length < maxStderrBytes) stderr += chunk;
      });
      child.on('error', (err) => finish({ ok: false, error: `cannot start osascript: ${err.message}` }));
      child.on('close', (code, signal) => {
        if (code === 0) finish({ ok: true });
        else finish({ ok: false, error: describeFailure(stderr, code, signal) });
      });
      child.stdin?.on('error', () => undefined); // a child that exits early closes the pipe; 'close' reports it
      child.stdin?.end(script);
    });
  }
}

const restartScript = `tell application "Messages" to quit
delay 3
tell application "Messages" to launch
`;

function describeFailure(stderr: string, code: number | null, signal: NodeJS.Signals | null): string {
  const text = stderr.trim().slice(0, 500);
  // -1743: the user has not allowed this terminal to control Messages (Automation permission).
  if (text.includes('-1743'))
    return `not allowed to control Messages (System Settings → Privacy & Security → Automation): ${text}`;
  if (text) return text;
  return signal ? `osascript killed by ${signal}` : `osascript exited with code ${code}`;
}
