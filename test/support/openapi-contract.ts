import { Ajv, type ValidateFunction } from 'ajv';
import addFormatsImport from 'ajv-formats';
import { recipientFormat } from '../../src/messages/recipients.ts';
import { phoneNumberFormat, toE164 } from '../../src/phone-number.ts';
import type { RecordedAnswer } from './answer-recorder.ts';

const addFormats = addFormatsImport as unknown as (ajv: Ajv) => Ajv;

interface Operation {
  key: string;
  method: string;
  path: string;
  pattern: RegExp;
  params: number;
  responses: Record<string, { $ref?: string; content?: Record<string, { schema: unknown }> }>;
}

/** JSON, as `application/json` or a structured `+json` type (`application/problem+json`). */
export const isJson = (mediaType: string) => /^application\/([a-z0-9.-]+\+)?json$/i.test(mediaType);

/** Checks recorded answers against an OpenAPI document: the status is documented, the body matches its schema. */
export class OpenApiContract {
  readonly operations: Operation[] = [];
  private readonly ajv = addFormats(new Ajv({ strict: false, allErrors: true }))
    .addFormat(phoneNumberFormat, (value: string) => toE164(value) !== undefined)
    .addFormat(recipientFormat, true);
  private readonly validators = new Map<unknown, ValidateFunction>();

  constructor(private readonly doc: any) {
    for (const [path, item] of Object.entries<Record<string, any>>(doc.paths)) {
      for (const [method, op] of Object.entries<any>(item)) {
        const source =
          '^' + path.replace(/[.*+?^$()|[\]\\]/g, '\\$&').replace(/\\?\{[^}]+\\?\}|\{[^}]+\}/g, '[^/]+') + '$';
        this.operations.push({
          key: `${method.toUpperCase()} ${path}`,
          method: method.toUpperCase(),
          path,
          pattern: new RegExp(source),
          params: (path.match(/\{/g) ?? []).length,
          responses: op.responses,
        });
      }
    }
    // A literal segment wins over a parameter (/conversations/lookup before /conversations/{id}), as in the router.
    this.operations.sort((a, b) => a.params - b.params);
  }

  operationOf(method: string, path: string): Operation | undefined {
    return this.operations.find((op) => op.method === method && op.pattern.test(path));
  }

  /** Problems with one answer, empty when it keeps the contract; undefined when no operation matches (unknown route or method). */
  check(answer: RecordedAnswer): { op: Operation; problems: string[] } | undefined {
    const op = this.operationOf(answer.method, answer.path);
    if (!op) return undefined;
    const documented = op.responses[String(answer.status)];
    if (!documented) return { op, problems: [`status ${answer.status} is not documented`] };
    // A shared answer (an error) is a reference to components.responses.
    const response: { content?: Record<string, { schema: unknown }> } = documented.$ref
      ? this.resolve(documented.$ref)
      : documented;
    const mediaType = (answer.contentType ?? '').split(';')[0]!.trim();
    if (!response.content) {
      const empty = answer.body === undefined || answer.body === '';
      return { op, problems: empty ? [] : [`status ${answer.status} documents no body, got ${mediaType || 'a body'}`] };
    }
    const media = response.content[mediaType];
    if (!media)
      return {
        op,
        problems: [
          `status ${answer.status}: media type ${mediaType || '(none)'} is not documented (${Object.keys(response.content).join(', ')})`,
        ],
      };
    if (answer.bodyOmitted || !isJson(mediaType)) return { op, problems: [] };
    const validate = this.validatorFor(media.schema);
    if (validate(answer.body)) return { op, problems: [] };
    const errors = (validate.errors ?? [])
      .slice(0, 5)
      .map((e) => `${e.instancePath || '/'} ${e.message}`)
      .join('; ');
    return { op, problems: [`status ${answer.status} body does not match the schema: ${errors}`] };
  }

  private validatorFor(schema: unknown): ValidateFunction {
    let validate = this.validators.get(schema);
    if (!validate) {
      validate = this.ajv.compile(this.inlineRefs(schema) as object);
      this.validators.set(schema, validate);
    }
    return validate;
  }

  /** A local reference (#/components/...) resolved in the document. */
  resolve(ref: string): any {
    if (!ref.startsWith('#/')) throw new Error(`not a local reference: ${ref}`);
    return ref
      .slice(2)
      .split('/')
      .reduce((node: any, key) => node?.[key.replace(/~1/g, '/').replace(/~0/g, '~')], this.doc);
  }

  /** Component references (#/components/schemas/Problem) replaced by the component itself. */
  private inlineRefs(schema: unknown): unknown {
    if (Array.isArray(schema)) return schema.map((s) => this.inlineRefs(s));
    if (schema === null || typeof schema !== 'object') return schema;
    const ref = (schema as { $ref?: string }).$ref;
    if (ref?.startsWith('#/')) return this.inlineRefs(this.resolve(ref));
    return Object.fromEntries(Object.entries(schema).map(([k, v]) => [k, this.inlineRefs(v)]));
  }
}
