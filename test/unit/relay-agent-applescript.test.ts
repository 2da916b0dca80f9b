import assert from 'node:assert/strict';
import { chmod, mkdtemp, readFile, rm, stat, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { test } from 'node:test';
import { AppleScriptSender, sendScript } from '../../packages/relay-agent/src/applescript-sender.ts';

/**
 * A stand-in for /usr/bin/osascript: writes each argv item NUL-terminated to
 * `argv.N`, the script it got on stdin to `script.N`, and fails on demand.
 */
async function fakeOsascript(t: { after(fn: () => Promise<void>): void }, behaviour = 'exit 0') {
  const dir = await mkdtemp(join(tmpdir(), 'relaybox-osascript-'));
  t.after(() => rm(dir, { recursive: true, force: true }));
  const path = join(dir, 'osascript');
  await writeFile(
    path,
    `#!/bin/sh
n=$(ls "${dir}" | grep -c '^argv\\.')
printf '%s\\0' "$@" > "${dir}/argv.$n"
cat > "${dir}/script.$n"
${behaviour}
`,
  );
  await chmod(path, 0o755);
  const run = async (n: number) => ({
    argv: (await readFile(join(dir, `argv.${n}`), 'utf8')).split('\0').slice(0, -1),
    script: await readFile(join(dir, `script.${n}`), 'utf8'),
  });
  return { path, dir, run };
}

const hostile = [
  'He said "hi" \\ and left',
  '" & do shell script "touch /tmp/relaybox-pwned" & "',
  '-e do shell script "id"',
  "it's\nmulti-line\ttext with 'quotes' and $(subshell) `ticks`",
];

test('recipient and body reach osascript as single plain argv items; the script text never changes', async (t) => {
  const fake = await fakeOsascript(t);
  const sender = new AppleScriptSender({ osascriptPath: fake.path });
  for (const [i, body] of hostile.entries()) {
    const outcome = await sender.send({
      messageId: `msg_${i}`,
      attempt: 1,
      to: '+15551234567',
      body,
      attachmentPaths: [],
    });
    assert.deepEqual(outcome, { ok: true });
    const { argv, script } = await fake.run(i);
    assert.deepEqual(argv, ['-', '+15551234567', body], `argv of send ${i}`);
    assert.equal(script, sendScript, 'the script is the constant one');
    assert.ok(!script.includes(body), 'the body is not in the script');
  }
  await assert.rejects(stat('/tmp/relaybox-pwned'), { code: 'ENOENT' });
});

test('attachment paths follow as further argv items, read by the script as POSIX files', async (t) => {
  const fake = await fakeOsascript(t);
  const sender = new AppleScriptSender({ osascriptPath: fake.path });
  await sender.send({
    messageId: 'm',
    attempt: 1,
    to: 'a@example.com',
    body: '',
    attachmentPaths: ['/tmp/x/1-a b.png', '/tmp/x/2-" & quit.pdf'],
  });
  const { argv } = await fake.run(0);
  assert.deepEqual(argv, ['-', 'a@example.com', '', '/tmp/x/1-a b.png', '/tmp/x/2-" & quit.pdf']);
  assert.match(sendScript, /on run argv/);
  assert.match(sendScript, /POSIX file \(item i of argv\)/);
});

test('an osascript failure is a failed outcome carrying its message', async (t) => {
  const fake = await fakeOsascript(
    t,
    `echo "execution error: Not authorized to send Apple events to Messages. (-1743)" >&2; exit 1`,
  );
  const outcome = await new AppleScriptSender({ osascriptPath: fake.path }).send({
    messageId: 'm',
    attempt: 1,
    to: 'x',
    body: 'y',
    attachmentPaths: [],
  });
  assert.equal(outcome.ok, false);
  if (!outcome.ok) assert.match(outcome.error, /Automation.*-1743/s);
});

test('a hung osascript is killed after the timeout, and a missing one is a failure, not a crash', async (t) => {
  const fake = await fakeOsascript(t, 'exec sleep 10');
  const hung = await new AppleScriptSender({ osascriptPath: fake.path, timeoutMs: 200 }).send({
    messageId: 'm',
    attempt: 1,
    to: 'x',
    body: 'y',
    attachmentPaths: [],
  });
  assert.deepEqual(hung, { ok: false, error: 'osascript did not finish within 200 ms' });
  const missing = await new AppleScriptSender({ osascriptPath: join(fake.dir, 'nope') }).send({
    messageId: 'm',
    attempt: 1,
    to: 'x',
    body: 'y',
    attachmentPaths: [],
  });
  assert.equal(missing.ok, false);
  if (!missing.ok) assert.match(missing.error, /cannot start osascript/);
});

test('a substituted spawn function sees the same constant argv layout', async () => {
  const calls: Array<{ command: string; args: string[] }> = [];
  const { spawn } = await import('node:child_process');
  const sender = new AppleScriptSender({
    osascriptPath: '/usr/bin/osascript',
    spawn: (command, args, options) => {
      calls.push({ command, args });
      return spawn('/bin/sh', ['-c', 'cat > /dev/null'], options);
    },
  });
  await sender.send({ messageId: 'm', attempt: 1, to: '+1', body: '" & beep & "', attachmentPaths: [] });
  assert.deepEqual(calls, [{ command: '/usr/bin/osascript', args: ['-', '+1', '" & beep & "'] }]);
});
