import { Type } from '@sinclair/typebox';

/** Query fields of every paginated list: page from 1, limit 1 to 100 (default 20). */
export const paginationQuery = {
  page: Type.Integer({ minimum: 1, maximum: 1_000_000, default: 1 }),
  limit: Type.Integer({ minimum: 1, maximum: 100, default: 20 }),
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

export function pageSchema(item: ReturnType<typeof Type.Object> | ReturnType<typeof Type.Any>) {
  return Type.Object({
    data: Type.Array(item),
    pagination: Type.Object({ page: Type.Integer(), limit: Type.Integer(), total: Type.Integer(), totalPages: Type.Integer() }),
  });
}
