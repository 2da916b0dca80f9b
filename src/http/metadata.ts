import { Type } from '@sinclair/typebox';

/**
 * A key a client may name metadata with. It becomes a field name in every
 * store: a '.' or a leading '$' is refused by MongoDB (and read as a path or
 * an operator), and `__proto__`, `constructor`, `prototype` change a plain
 * JavaScript object's behaviour, so the same keys are refused on every backend.
 */
export const metadataKeyPattern = '^(?!(__proto__|constructor|prototype)$)[A-Za-z0-9_-]{1,100}$';
export const metadataMaxKeys = 50;

/** Free-form string values by name (letters, digits, '_' and '-', at most 100 characters; at most 50 keys). */
export const metadataSchema = Type.Record(Type.String(), Type.String({ maxLength: 1000 }), {
  maxProperties: metadataMaxKeys,
  propertyNames: { type: 'string', pattern: metadataKeyPattern },
  description: 'string values by name: keys of letters, digits, "_" and "-", at most 100 characters, at most 50 keys',
});
