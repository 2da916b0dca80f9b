import assert from 'node:assert/strict';
import { test } from 'node:test';
import { eventNames } from '../../src/events/event-stream.ts';
import { maxJobMessages } from '../../src/jobs/job-schemas.ts';
import { maxBodyChars } from '../../src/messages/message-schemas.ts';
import { csvRecords, limits, parseCsv, parseJsonRows, parseUpload, summarize, toCsv } from '../../web/bulk-rows.ts';
import { webhookEvents } from '../../web/event-names.ts';

test('the preview uses the API limits and event names', () => {
  assert.equal(limits.bodyChars, maxBodyChars);
  assert.equal(limits.jobMessages, maxJobMessages);
  assert.deepEqual([...webhookEvents], [...eventNames]);
});

test('CSV: quoted fields keep commas, doubled quotes and line breaks; records know their first line', () => {
  const records = csvRecords('to,body\n+4915150000001,"Hi, ""you""\nline two"\n+4915150000002,plain\n');
  assert.deepEqual(records, [
    { line: 1, fields: ['to', 'body'] },
    { line: 2, fields: ['+4915150000001', 'Hi, "you"\nline two'] },
    { line: 4, fields: ['+4915150000002', 'plain'] },
  ]);
});

test('CSV: a BOM, CRLF line ends, a missing final line end and blank lines', () => {
  const { rows, error } = parseCsv('\uFEFFto,body\r\n+4915150000001,"a\r\nb"\r\n\r\n+4915150000002,c');
  assert.equal(error, undefined);
  assert.deepEqual(
    rows.map((r) => [r.line, r.to, r.body, r.problems]),
    [
      [2, '+4915150000001', 'a\r\nb', []],
      [5, '+4915150000002', 'c', []],
    ],
  );
});

test('CSV: the header names the columns in any order and case; extra columns are ignored', () => {
  const { rows } = parseCsv('Name,BODY,To\nAda,hello,+4915150000001\n');
  assert.deepEqual(
    rows.map((r) => [r.to, r.body]),
    [['+4915150000001', 'hello']],
  );
  assert.match(parseCsv('phone,text\n1,2\n').error ?? '', /header naming the columns to and body/);
  assert.match(parseCsv('').error ?? '', /empty/);
});

test('rows are checked by the API rules, each problem named', () => {
  const { rows } = parseCsv(
    [
      'to,body',
      '+4915150000001,ok',
      'not-a-number,x',
      '+19999999999,no such area code',
      '+4915150000001,',
      ',no recipient',
      'group:abc,groups are not bulk recipients',
      'someone@example.com,email is fine',
      'chat:iMessage;+;chat123,chat is fine',
      `+4915150000001,${'x'.repeat(maxBodyChars + 1)}`,
    ].join('\n'),
  );
  const problems = rows.map((r) => r.problems.join('; '));
  assert.equal(problems[0], '');
  assert.match(problems[1]!, /^to must be a phone number in international form/);
  assert.match(problems[2]!, /^to is not a valid phone number/);
  assert.equal(problems[3], 'body is empty');
  assert.equal(problems[4], 'to is empty');
  assert.match(problems[5]!, /contact group is not a recipient of a bulk job/);
  assert.equal(problems[6], '');
  assert.equal(problems[7], '');
  assert.match(problems[8]!, /body is longer than 10,000 characters/);
  assert.deepEqual(summarize(rows), { valid: 3, invalid: 6 });
});

test('JSON: an array of {to, body}; wrong shapes are rows with reasons, not a failure of the file', () => {
  const { rows } = parseJsonRows(
    JSON.stringify([{ to: '+4915150000001', body: 'hi' }, { to: 5, body: 'x' }, 'text', { to: '+4915150000002' }]),
  );
  assert.deepEqual(
    rows.map((r) => r.problems),
    [[], ['to must be a string'], ['the entry is not an object'], ['body is empty']],
  );
  assert.match(parseJsonRows('{"to":"x"}').error ?? '', /must be an array/);
  assert.match(parseJsonRows('[').error ?? '', /not valid JSON/);
});

test('the parser follows the file name, else the first character', () => {
  assert.equal(parseUpload('list.json', '[{"to":"+4915150000001","body":"a"}]').rows.length, 1);
  assert.equal(parseUpload('list.csv', 'to,body\n+4915150000001,a\n').rows.length, 1);
  assert.equal(parseUpload('list.txt', '\uFEFF [{"to":"+4915150000001","body":"a"}]').rows.length, 1);
});

test('10,000 rows parse and check in well under a second', () => {
  const lines = ['to,body'];
  for (let i = 0; i < 10_000; i++) lines.push(`+49151${String(50_000_000 + i)},"Hello, number ${i}\nsee you"`);
  const started = performance.now();
  const { rows } = parseCsv(lines.join('\r\n'));
  const ms = performance.now() - started;
  assert.equal(rows.length, 10_000);
  assert.deepEqual(summarize(rows), { valid: 10_000, invalid: 0 });
  // Generous on a loaded machine; the point is that the preview is not quadratic.
  assert.ok(ms < 5_000, `took ${ms.toFixed(0)} ms`);
});

test('failed rows download as CSV that parses back to the same rows', () => {
  const csv = toCsv(
    ['to', 'body', 'error'],
    [
      ['+4915150000001', 'a, "b"\nc', 'relay said no'],
      ['+4915150000002', ' lead', ''],
    ],
  );
  assert.deepEqual(
    csvRecords(csv).map((r) => r.fields),
    [
      ['to', 'body', 'error'],
      ['+4915150000001', 'a, "b"\nc', 'relay said no'],
      ['+4915150000002', ' lead', ''],
    ],
  );
});
