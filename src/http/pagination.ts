import { Type, type TSchema } from '@sinclair/typebox';
import { named } from './route.ts';

/** Query fields of every paginated list: page from 1, limit 1 to 100 (default 20). */
export const paginationQuery = {
  page: Type.Integer({ minimum: 1, maximum: 1_000_000, default: 1, description: 'page number, from 1' }),
  limit: Type.Integer({ minimum: 1, maximum: 100, default: 20, description: 'items per page' }),
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

const paginationSchema = named('Pagination', Type.Object({ page: Type.Integer(), limit: Type.Integer(), total: Type.Integer(), totalPages: Type.Integer() }));

export function pageSchema<T extends TSchema>(item: T) {
  return Type.Object({
    data: Type.Array(item),
    pagination: paginationSchema,
  });
}
