import assert from 'node:assert/strict';
import { test } from 'node:test';
import { quietUntil, tableZones, zoneOfNumber } from '../../src/actors/tenant/quiet-hours.ts';
import { isTimeZone } from '../../src/time-zone.ts';

const night = { start: '21:00', end: '08:00' };

test('the zone table: North American area codes, single-zone countries, and nothing for what it cannot place', () => {
  assert.equal(zoneOfNumber('+14155550100'), 'America/Los_Angeles');
  assert.equal(zoneOfNumber('+12125550100'), 'America/New_York');
  assert.equal(zoneOfNumber('+13125550100'), 'America/Chicago');
  assert.equal(zoneOfNumber('+16025550100'), 'America/Phoenix');
  assert.equal(zoneOfNumber('+18085550100'), 'Pacific/Honolulu');
  assert.equal(zoneOfNumber('+14165550100'), 'America/New_York', 'Toronto keeps Eastern time');
  assert.equal(zoneOfNumber('+442079460000'), 'Europe/London');
  assert.equal(zoneOfNumber('+353861234567'), 'Europe/Dublin', 'a three-digit calling code');
  assert.equal(zoneOfNumber('+819012345678'), 'Asia/Tokyo');
  assert.equal(zoneOfNumber('+15555550100'), undefined, 'an area code not in service');
  assert.equal(zoneOfNumber('+525512345678'), undefined, 'Mexico has several zones');
  assert.equal(zoneOfNumber('+61412345678'), undefined, 'so has Australia');
  assert.equal(zoneOfNumber('someone@example.com'), undefined);
  for (const zone of tableZones()) assert.ok(isTimeZone(zone), `${zone} is a zone this runtime knows`);
});

test('a window past midnight: quiet from its start to its end, the end today or tomorrow', () => {
  const zone = 'Europe/Paris'; // UTC+1 in January
  assert.equal(quietUntil(night, zone, Date.parse('2026-01-15T19:59:00Z')), null, '20:59');
  assert.equal(
    quietUntil(night, zone, Date.parse('2026-01-15T20:00:00Z')),
    Date.parse('2026-01-16T07:00:00Z'),
    '21:00: until tomorrow 08:00',
  );
  assert.equal(
    quietUntil(night, zone, Date.parse('2026-01-16T03:00:00Z')),
    Date.parse('2026-01-16T07:00:00Z'),
    '04:00: until today 08:00',
  );
  assert.equal(quietUntil(night, zone, Date.parse('2026-01-16T07:00:00Z')), null, '08:00 is awake');
  assert.equal(
    quietUntil({ start: '12:00', end: '14:00' }, zone, Date.parse('2026-01-16T11:30:00Z')),
    Date.parse('2026-01-16T13:00:00Z'),
    'a window within a day',
  );
  assert.equal(quietUntil({ start: '08:00', end: '08:00' }, zone, Date.parse('2026-01-16T11:30:00Z')), null, 'empty');
});

test('daylight saving time: the night the clocks change ends at the local 08:00 of the new offset', () => {
  const ny = 'America/New_York';
  // Spring forward, 2026-03-08 02:00 EST → 03:00 EDT: the night's 08:00 is 12:00 UTC, not 13:00.
  assert.equal(quietUntil(night, ny, Date.parse('2026-03-08T04:00:00Z')), Date.parse('2026-03-08T12:00:00Z'));
  // Fall back, 2026-11-01 02:00 EDT → 01:00 EST: 08:00 is 13:00 UTC.
  assert.equal(quietUntil(night, ny, Date.parse('2026-11-01T03:00:00Z')), Date.parse('2026-11-01T13:00:00Z'));
  // A window ending in the skipped hour (02:30 that night) ends when the clocks jump, at 03:00 EDT at the latest.
  const end = quietUntil({ start: '01:00', end: '02:30' }, ny, Date.parse('2026-03-08T06:30:00Z'))!;
  assert.ok(
    end >= Date.parse('2026-03-08T07:00:00Z') && end <= Date.parse('2026-03-08T07:30:00Z'),
    new Date(end).toISOString(),
  );
  assert.equal(quietUntil({ start: '01:00', end: '02:30' }, ny, end), null, 'and is over then');
  // A window ending in the hour passed twice (01:30 that night) ends at its first 01:30.
  assert.equal(
    quietUntil({ start: '00:00', end: '01:30' }, ny, Date.parse('2026-11-01T04:30:00Z')),
    Date.parse('2026-11-01T05:30:00Z'),
  );
  // London's spring forward, 2026-03-29 01:00 GMT → 02:00 BST.
  assert.equal(
    quietUntil(night, 'Europe/London', Date.parse('2026-03-29T00:30:00Z')),
    Date.parse('2026-03-29T07:00:00Z'),
  );
});
