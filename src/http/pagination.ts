import { Type, type TSchema } from '@sinclair/typebox';
import { validationError } from '../errors.ts';
import {
  afterKeys,
  totalOrder,
  type Collection,
  type Doc,
  type Filter,
  type Scope,
  type Sort,
} from '../store/collection.ts';
import { getPath } from '../store/query.ts';
import { cursorCharacters, maxCursorChars, type ListCursors, type SortKeys } from './list-cursors.ts';
import { named, type AnswerSpec, type RequestContext } from './route.ts';
import { violationKey, type ViolationNote } from './validation.ts';

/** Query fields of every paginated list: page from 1, limit 1 to 100 (default 20). */
export const paginationQuery = {
  page: Type.Integer({ minimum: 1, maximum: 1_000_000, default: 1, description: 'page number, from 1' }),
  limit: Type.Integer({ minimum: 1, maximum: 100, default: 20, description: 'items per page' }),
};

/** Query fields of a long list, which pages by cursor too: `after` (a page's `nextCursor`) instead of `page`. */
export const keysetPaginationQuery = {
  ...paginationQuery,
  after: Type.Optional(
    Type.String({
      minLength: 1,
      maxLength: maxCursorChars,
      pattern: cursorCharacters,
      description:
        'a nextCursor as a page of this list gave it: the page after that one, read by cursor (no pagination figures); not with page',
    }),
  ),
};

/** The object rule of a keyset list's query: `page` and `after` together are a 400 (ajv checks it before `page` gets its default). */
export const pageOrAfter = {
  not: { required: ['page', 'after'] },
  [violationKey]: {
    path: 'page',
    message: 'cannot be combined with after: the cursor says where its page starts',
  } satisfies ViolationNote,
};

export interface Page<T> {
  data: T[];
  pagination: { page: number; limit: number; total: number; totalPages: number };
}

export function paginate<T>(data: T[], total: number, page: number, limit: number): Page<T> {
  return { data, pagination: { page, limit, total, totalPages: Math.ceil(total / limit) } };
}

export function pageWindow(page: number, limit: number): { skip: number; limit: number } {
  return { skip: (page - 1) * limit, limit };
}

const paginationSchema = named(
  'Pagination',
  Type.Object({ page: Type.Integer(), limit: Type.Integer(), total: Type.Integer(), totalPages: Type.Integer() }),
);

export function pageSchema<T extends TSchema>(item: T) {
  return Type.Object({
    data: Type.Array(item),
    pagination: paginationSchema,
  });
}

/** Where a page of a keyset list starts: page `page` by offset, or (with `after`) just after the item whose sort keys those are. */
export interface PageRequest {
  page: number;
  limit: number;
  after?: SortKeys;
}

/**
 * A keyset list's `pagination`, on every page so every page has one shape: a
 * page read by offset has its figures, one read by cursor only its `limit`
 * (it counts nothing and has no page number: `page`, `total` and `totalPages`
 * are null).
 */
export type ListPagination = Page<unknown>['pagination'] | { page: null; limit: number; total: null; totalPages: null };

export interface ListPage<T> {
  data: T[];
  pagination: ListPagination;
  /** The sort keys of the page's last item when more items follow it; null on the last page. */
  next: SortKeys | null;
}

/** The figures of a page read by cursor: its limit, and nothing counted. */
const cursorPagination = (limit: number): ListPagination => ({ page: null, limit, total: null, totalPages: null });

/** A page that holds nothing, whichever way it was asked for. */
export function emptyPage(q: PageRequest): ListPage<never> {
  const pagination = q.after ? cursorPagination(q.limit) : paginate([], 0, q.page, q.limit).pagination;
  return { pagination, data: [], next: null };
}

/**
 * One page of a list in `sort` order, made total with `id` so each item has
 * one place in it: by offset, with the total, or by keyset, after `q.after`.
 * A keyset page's filter says "after these sort keys" in the port's language
 * (`afterKeys`), with a range on the first sort key beside it, so an index
 * over the filter's equalities and the sort keys is walked from the cursor
 * on: the ten-thousandth page costs what the first does, and no item is on
 * two pages however many arrive in between. One item more than the page is
 * read, to know whether another page follows.
 */
export async function readListPage<D extends Doc>(
  collection: Collection<D>,
  scope: Scope,
  filter: Filter,
  sort: Sort,
  q: PageRequest,
): Promise<ListPage<D>> {
  const order = totalOrder(sort);
  const keys = Object.keys(order);
  if (q.after && q.after.length !== keys.length)
    throw validationError('/after', 'is a cursor of another order of this list: start again from the first page');
  const { skip } = pageWindow(q.page, q.limit);
  const [found, total] = await Promise.all([
    collection.find(scope, q.after ? keysetFilter(filter, order, q.after) : filter, {
      sort: order,
      skip: q.after ? 0 : skip,
      limit: q.limit + 1,
    }),
    q.after ? undefined : collection.count(scope, filter),
  ]);
  const data = found.slice(0, q.limit);
  const last = found.length > q.limit ? data[data.length - 1] : undefined;
  return {
    data,
    pagination: total === undefined ? cursorPagination(q.limit) : paginate(data, total, q.page, q.limit).pagination,
    next: last ? keys.map((key) => sortKey(last, key)) : null,
  };
}

function sortKey(doc: Doc, key: string): string | number {
  const value = getPath(doc, key);
  if (typeof value === 'string' || (typeof value === 'number' && Number.isFinite(value))) return value;
  throw new Error(`${key} of ${doc.id} is no sort key: ${JSON.stringify(value)}`);
}

/** `filter`, and after `values` in `order`; the range on the first key stays at the top, where both stores' index selection sees it. */
function keysetFilter(filter: Filter, order: Sort, values: SortKeys): Filter {
  const [first, dir] = Object.entries(order)[0]!;
  const range = { [first]: { [dir === 1 ? '$gte' : '$lte']: values[0] } };
  const after = afterKeys(order, values);
  const out: Filter = { ...filter };
  const and: Filter[] = [...((filter.$and as Filter[] | undefined) ?? [])];
  if (first in out) and.push(range);
  else Object.assign(out, range);
  if ('$or' in out) and.push(after);
  else Object.assign(out, after);
  if (and.length > 0) out.$and = and;
  return out;
}

const nullableInteger = Type.Union([Type.Integer(), Type.Null()]);

const listPaginationSchema = named(
  'ListPagination',
  Type.Object(
    { page: nullableInteger, limit: Type.Integer(), total: nullableInteger, totalPages: nullableInteger },
    { description: 'on every page; on a page read by cursor (after), which counts nothing, all but limit are null' },
  ),
);

/** The body of a keyset list's page. */
export function listPageSchema<T extends TSchema>(item: T) {
  return Type.Object({
    data: Type.Array(item),
    pagination: listPaginationSchema,
    nextCursor: Type.Union([Type.String(), Type.Null()], {
      description:
        'pass as after to read the next page; null on the last page. Opaque, and only for this list of this organization',
    }),
  });
}

/** A keyset list's 200: its page, and the link to the next one. */
export function listAnswer<T extends TSchema>(item: T) {
  return {
    description: 'a page of the list',
    content: { 'application/json': listPageSchema(item) },
    headers: {
      link: {
        description:
          '`<url>; rel="next"` (RFC 8288): the next page, with the request\'s other query parameters and after=nextCursor; absent on the last page',
      },
    },
  } satisfies AnswerSpec;
}

/**
 * A keyset list's answer: `after` read back into sort keys (a 400 for a
 * cursor this list did not give the caller's organization), the page `read`
 * gives, its `nextCursor`, and a `Link` header to the next page (RFC 8288).
 */
export async function listReply<T>(
  ctx: RequestContext,
  cursors: ListCursors,
  read: (after: SortKeys | undefined) => Promise<ListPage<T>>,
) {
  const tenantId: string = ctx.principal.tenantId;
  const { after: cursor } = ctx.query as { after?: string };
  const after = cursor === undefined ? undefined : await cursors.decode(tenantId, ctx.route, cursor);
  const { next, ...page } = await read(after);
  const nextCursor = next ? await cursors.encode(tenantId, ctx.route, next) : null;
  const headers: Record<string, string> = nextCursor ? { link: `<${nextPageUrl(ctx, nextCursor)}>; rel="next"` } : {};
  return { status: 200 as const, body: { ...page, nextCursor }, headers };
}

/** Root-relative: this list with the request's query parameters but `page`, and `after` the next cursor. */
function nextPageUrl(ctx: RequestContext, cursor: string): string {
  const path = ctx.route.replace(/:(\w+)/g, (_, name: string) => encodeURIComponent(String(ctx.params[name])));
  const params = new URLSearchParams();
  for (const [name, value] of Object.entries(ctx.query as Record<string, unknown>)) {
    if (name !== 'page' && name !== 'after' && value !== undefined) params.append(name, String(value));
  }
  params.append('after', cursor);
  return `${path}?${params}`;
}
