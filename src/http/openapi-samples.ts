import type { RouteDef } from './route.ts';
import { formatExample } from './validation.ts';

/** A code sample as Redoc renders it (`x-codeSamples`). */
export interface CodeSample {
  lang: string;
  label: string;
  source: string;
}

/** What a sample needs of an operation, as the OpenAPI document describes it. */
export interface SampleInput {
  route: RouteDef;
  /** The path with `{name}` parameters. */
  path: string;
  /** The JSON body schema as a client sees it (defaults not required), if the operation takes one. */
  body: Record<string, any> | undefined;
  query: Record<string, any> | undefined;
}

/**
 * A curl and a TypeScript (openapi-fetch, as in examples/typed-client) call
 * of each operation, made from the route table: the path's parameters, the
 * required query parameters, and a body holding the required fields with
 * values that pass validation. Nothing is written per route.
 */
export function codeSamplesOf(input: SampleInput): CodeSample[] {
  return [
    { lang: 'Shell', label: 'curl', source: curlSample(input) },
    { lang: 'TypeScript', label: 'TypeScript', source: typeScriptSample(input) },
  ];
}

const shellName = (param: string) => `$${param.replace(/([a-z0-9])([A-Z])/g, '$1_$2').toUpperCase()}`;

function requiredQuery(query: Record<string, any> | undefined): Record<string, unknown> {
  const out: Record<string, unknown> = {};
  for (const name of query?.required ?? []) out[name] = exampleOf(query!.properties[name], name);
  return out;
}

function curlSample({ route, path, body, query }: SampleInput): string {
  const params = new URLSearchParams(
    Object.entries(requiredQuery(query)).map(([k, v]): [string, string] => [k, String(v)]),
  ).toString();
  const url = `$RELAYBOX_URL${path.replace(/\{([^}]+)\}/g, (_, name: string) => shellName(name))}${params ? `?${params}` : ''}`;
  const lines = [`curl${route.method === 'GET' ? '' : ` -X ${route.method}`} "${url}"`];
  if (route.platform) lines.push('-H "Authorization: Bearer $RELAYBOX_PLATFORM_KEY"');
  else if (route.auth !== false) lines.push('-H "Authorization: Bearer $RELAYBOX_API_KEY"');
  if (route.uploadField) lines.push(`-F "${route.uploadField}=@contacts.csv"`);
  else if (body)
    lines.push('-H "Content-Type: application/json"', `-d '${JSON.stringify(exampleOf(body)).replace(/'/g, "'\\''")}'`);
  return lines.join(' \\\n  ');
}

function typeScriptSample({ route, path, body, query }: SampleInput): string {
  const options: string[] = [];
  const pathParams = [...path.matchAll(/\{([^}]+)\}/g)].map((m) => m[1]!);
  const queryParams = requiredQuery(query);
  const params = [
    ...(pathParams.length > 0 ? [`path: { ${pathParams.join(', ')} }`] : []),
    ...(Object.keys(queryParams).length > 0 ? [`query: ${literal(queryParams)}`] : []),
  ];
  if (params.length > 0) options.push(`params: { ${params.join(', ')} }`);
  if (route.uploadField) {
    const field = route.uploadField;
    options.push(`body: { ${field}: 'contacts.csv' }`);
    options.push(
      `bodySerializer: (body) => {\n    const form = new FormData();\n    form.append('${field}', new Blob([readFileSync(body.${field}, 'utf8')]), body.${field});\n    return form;\n  }`,
    );
  } else if (body) {
    options.push(`body: ${literal(exampleOf(body))}`);
  }
  const call =
    options.length === 0
      ? `await client.${route.method}('${path}')`
      : `await client.${route.method}('${path}', {\n  ${options.join(',\n  ')},\n})`;
  return `// client: createClient<paths>() from openapi-fetch (examples/typed-client)\nconst { data, error } = ${call};`;
}

/** A TypeScript literal of a JSON value: single quotes, keys unquoted where they can be. */
function literal(value: unknown): string {
  if (typeof value === 'string') return `'${value.replace(/\\/g, '\\\\').replace(/'/g, "\\'")}'`;
  if (Array.isArray(value)) return `[${value.map(literal).join(', ')}]`;
  if (value !== null && typeof value === 'object') {
    const entries = Object.entries(value).map(
      ([k, v]) => `${/^[A-Za-z_$][\w$]*$/.test(k) ? k : literal(k)}: ${literal(v)}`,
    );
    return entries.length === 0 ? '{}' : `{ ${entries.join(', ')} }`;
  }
  return JSON.stringify(value);
}

/**
 * A valid value of a schema: its example, const, default or first choice; for
 * an object its required fields (those of its first `anyOf` alternative too),
 * or its first field when none is required; strings by their format (a
 * phone number, an email address, a URL) or else the field's name in words.
 */
export function exampleOf(schema: Record<string, any>, name = ''): unknown {
  if (Array.isArray(schema.examples) && schema.examples.length > 0) return schema.examples[0];
  if ('const' in schema) return schema.const;
  if (schema.default !== undefined) return schema.default;
  if (Array.isArray(schema.enum)) return schema.enum[0];
  const choices: Array<Record<string, any>> | undefined =
    schema.type === undefined ? (schema.anyOf ?? schema.oneOf) : undefined;
  if (choices) return exampleOf(choices.find((c) => c.type !== 'null') ?? choices[0]!, name);
  const type = Array.isArray(schema.type) ? schema.type.find((t: string) => t !== 'null') : schema.type;
  if (type === 'object' || schema.properties) {
    const properties: Record<string, any> = schema.properties ?? {};
    const alternative = (schema.anyOf ?? schema.oneOf)?.[0] as Record<string, any> | undefined;
    const required = [...new Set<string>([...(schema.required ?? []), ...(alternative?.required ?? [])])];
    const names = required.length > 0 ? required : Object.keys(properties).slice(0, 1);
    return Object.fromEntries(
      names.map((n) => [n, exampleOf({ ...properties[n], ...alternative?.properties?.[n] }, n)]),
    );
  }
  if (type === 'array') return [exampleOf(schema.items ?? {}, name.replace(/s$/, ''))];
  if (type === 'integer' || type === 'number') return schema.minimum ?? 1;
  if (type === 'boolean') return true;
  return stringExample(schema, name);
}

function stringExample(schema: Record<string, any>, name: string): string {
  const known =
    formatExample(schema.format) ??
    (/^phone number/i.test(schema.description ?? '') ? formatExample('phone-number') : undefined);
  if (known) return known;
  if (schema.format === 'email' || /email$/i.test(name)) return 'ada@example.com';
  if (schema.format === 'uri' || /url$/i.test(name)) return 'https://example.com/relaybox';
  if (schema.format === 'date-time') return '2030-01-01T09:00:00Z';
  const words = name.replace(/([a-z0-9])([A-Z])/g, '$1 $2').toLowerCase() || 'text';
  let text = words;
  while (text.length < (schema.minLength ?? 0)) text += ` ${words}`;
  return text.slice(0, schema.maxLength ?? text.length);
}
