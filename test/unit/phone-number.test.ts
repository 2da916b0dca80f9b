import assert from 'node:assert/strict';
import { test } from 'node:test';
import { toE164 } from '../../src/phone-number.ts';

test('numbers that do not exist in their numbering plan are refused, also when asked again', () => {
  for (let round = 0; round < 2; round++) {
    assert.equal(toE164('+19999999999'), undefined, 'no such US area code');
    assert.equal(toE164('+12345678'), undefined, 'too short');
    assert.equal(toE164('+123456789012345'), undefined);
    assert.equal(toE164('14155550100'), undefined, 'international form only: a leading +');
    assert.equal(toE164('+1 415 555 0100 ext. 12345678901234567890'), undefined, 'too long to be a number');
  }
});

test('a real number typed with spaces, dashes, dots or brackets is answered in E.164', () => {
  for (let round = 0; round < 2; round++) {
    assert.equal(toE164('+1 415 555 0100'), '+14155550100');
    assert.equal(toE164('+1 (415) 555-0100'), '+14155550100');
    assert.equal(toE164(' +1.415.555.0100 '), '+14155550100');
    assert.equal(toE164('+44 20 7123 4567'), '+442071234567');
    assert.equal(toE164('+49 1515 1234567'), '+4915151234567');
  }
});
