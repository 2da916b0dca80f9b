/** What `relaybox-relay --help` prints, and a command-line mistake prints after its message. */
export const usage = `Usage:
  relaybox-relay connect --server wss://HOST/api/v1/relays/connect --token TOKEN [options]
  relaybox-relay service install [--server URL] [--name NAME] [--state-dir DIR] [--chat-db PATH] [--log-handles] [--dry-run]
  relaybox-relay service uninstall|status [--dry-run]
  relaybox-relay service logs [--lines N] [--follow] [--dry-run]
  relaybox-relay doctor [--json] [--server URL] [--state-dir DIR] [--chat-db PATH] [--simulate] [--log-handles]
  relaybox-relay simulate-inbound [--chat-db PATH] --from HANDLE --body TEXT [--attributed-only] [--group ID] [--attachment FILE]...
  relaybox-relay simulate-failures [--chat-db PATH] [--count N] [--error CODE | --never-deliver]
  relaybox-relay simulate-sms-only [--chat-db PATH] --to HANDLE [--off]
  relaybox-relay simulate-no-imessage [--chat-db PATH] --to HANDLE [--off]
  relaybox-relay simulate-reaction [--chat-db PATH] --from HANDLE --target GUID --tapback KIND [--emoji E] [--removed]
  relaybox-relay simulate-reply [--chat-db PATH] --from HANDLE --to-guid GUID --body TEXT
  relaybox-relay simulate-edit [--chat-db PATH] --guid GUID --body TEXT
  relaybox-relay simulate-unsend [--chat-db PATH] --guid GUID
  relaybox-relay simulate-group [--chat-db PATH] --group ID --from HANDLE (--rename NAME | --add HANDLE | --remove HANDLE | --leave)
  relaybox-relay simulate-stall [--chat-db PATH] [--off]

connect is the default command: \`relaybox-relay --server URL\` is the same. In a checkout of Relaybox,
\`npm run relay -- ARGS\` runs \`relaybox-relay ARGS\`.

Options:
  --server URL         relay WebSocket endpoint of the Relaybox server (ws:// or wss://)
  --token TOKEN        registration token, first run only (later runs use the stored credential);
                       or set RELAYBOX_TOKEN so it stays out of ps and the shell history
  --name NAME          relay name returned by GET /api/v1/relays (default: this computer's hostname)
  --state-dir DIR      where the credential and send journal live (default: ~/.relaybox-relay)
  --chat-db PATH       Messages database (default: ~/Library/Messages/chat.db)
  --simulate           play the Messages app against --chat-db (created if absent; default:
                       simulated-chat.db in the state directory) instead of sending
  --capacity N         sends accepted in flight, 1..1000 (default 10)
  --poll-ms N          how often chat.db is read, 50..60000 ms (default 1000)
  --sync-history       on first registration, forward all existing received messages
  --log-format FORMAT  pretty (one line per event) or json (default: pretty on a terminal, json otherwise)
  --log-handles        log phone numbers and email addresses in full, for a support session
                       (default: masked, +1415•••0123; message bodies are never logged)
  -h, --help           show this help

service install runs \`relaybox-relay connect\` as a LaunchAgent of this user (~/Library/LaunchAgents/
com.relaybox.relay.plist): started at login, restarted after a crash, not after a clean stop, output in
~/Library/Logs/Relaybox/. It uses the credential a first \`connect --token\` stored (--server defaults to
its server). --dry-run prints the property list and the commands instead of running them.

doctor checks what a relay needs (chat.db readable: Full Disk Access; Messages answers AppleScript:
Automation; an iMessage account; the server accepts the stored credential; clock skew; free disk) and
prints each result with its fix; --json prints them as JSON, and a refused command line or a failure
as {"ok": false, "error": {...}}. Exit code 1 if any check fails.

simulate-inbound writes a received message into a simulated chat.db (--attributed-only: body only in
attributedBody; --group ID: into a group chat; --attachment FILE, repeatable: with that file attached, which
the agent uploads once the server has the message; the simulator commands take --state-dir too, and without
--chat-db use the simulated chat.db there); simulate-failures makes its next N sends (default 1) fail with
Messages' error CODE (default 1; 22 is "not registered with iMessage", 3 a network failure), or with
--never-deliver be sent and never delivered; simulate-sms-only makes a recipient reachable by SMS only
(--off: by iMessage again), so its rows are written on the SMS service; simulate-no-imessage gives a
recipient no iMessage (--off: gives it back): a send over iMessage fails with error 22, one sent as SMS
(a send's fallback) goes; simulate-reaction writes a tapback
from HANDLE on the message whose guid is GUID (KIND: love, like, dislike, laugh, emphasize, question, or
emoji with --emoji; --removed: its removal); simulate-reply writes a message from HANDLE replying to the
message whose guid is GUID; simulate-edit and simulate-unsend change a received message (by its guid) as
the sender's edit or unsend does; simulate-group writes a group event in the group chat ID made by HANDLE:
a rename, a member added or removed, or HANDLE leaving;
simulate-stall makes the simulated Messages app take sends and write no rows until it is restarted (--off: until now).

Environment:
  RELAYBOX_TOKEN         registration token (instead of --token)
  LOG_LEVEL              debug, info (default), warn, error
  RELAY_SUMMARY_MS       how often the one-line summary is logged (default 60000; 0: never)
  RELAY_MATCH_WINDOW_MS  how long a sent message's chat.db row may take to appear (default 120000)
  RELAY_STUCK_MS         a send with no chat.db row after this long means Messages is stuck: the relay
                         reports itself degraded and takes no new sends (default 60000)
  RELAY_RESTART_INTERVAL_MS  a stuck Messages is restarted at most once per this interval (default 600000)
  RELAY_SIM_DELIVERY_MS  simulator: delay before a sent message is delivered (default 500)
  RELAY_SIM_READ_MS      simulator: delay after delivery before it is read (default: never)
  RELAY_OSASCRIPT        osascript program (default: /usr/bin/osascript)

Exit codes: 0 stopped, 1 cannot run (the message says why), 2 bad arguments.`;
