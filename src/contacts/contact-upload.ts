import { extname } from 'node:path';
import { Readable } from 'node:stream';
import busboy from 'busboy';
import { AppError, pointer } from '../errors.ts';
import { looksLikeHeader } from './contact-csv.ts';

/** decisions.md: an import file is at most 10 MiB. */
export const importFileMaxBytes = 10 * 1024 * 1024;
/** The request body may add the multipart framing (boundaries, part headers, small fields) to the file. */
export const importBodyMaxBytes = importFileMaxBytes + 64 * 1024;

export const importFieldName = 'file';

export type ImportFormat = 'csv' | 'json';

export interface ImportUpload {
  format: ImportFormat;
  filename: string;
  /** The file's bytes, streamed from the request body already in memory (no second copy). */
  open(): Readable;
}

const csvTypes = new Set(['text/csv', 'application/csv', 'text/comma-separated-values']);
/** Types that say nothing about the content: only these are sniffed. */
const genericTypes = new Set(['', 'application/octet-stream', 'text/plain', 'binary/octet-stream']);
const sniffBytes = 4096;

interface FilePart {
  filename: string;
  mimeType: string;
  chunks: Buffer[];
}

/**
 * Reads the `file` part of a multipart/form-data import request: 415 for a
 * body that is not multipart or a file that is neither CSV nor JSON, 400 for
 * a malformed body or one without a file, 413 for a file over 10 MiB. The
 * checks all run before a single row is imported.
 */
export async function readImportUpload(
  raw: Buffer | undefined,
  contentType: string | undefined,
): Promise<ImportUpload> {
  if (!contentType || !/^\s*multipart\/form-data\s*(;|$)/i.test(contentType)) {
    throw new AppError(
      'unsupported_media_type',
      `the body must be multipart/form-data with the import file in the field "${importFieldName}"`,
    );
  }
  const part = await filePart(raw ?? Buffer.alloc(0), contentType);
  const format = detectFormat(part);
  if (!format) {
    throw new AppError(
      'unsupported_media_type',
      'the file must be CSV (.csv, text/csv, a header row of contact fields) or JSON (.json, application/json, an array of contacts)',
    );
  }
  return { format, filename: part.filename, open: () => Readable.from(part.chunks, { objectMode: false }) };
}

function filePart(raw: Buffer, contentType: string): Promise<FilePart> {
  return new Promise((resolve, reject) => {
    let parser: busboy.Busboy;
    try {
      // Busboy reports reaching its limit, so the limit is one byte more than a file may have.
      parser = busboy({
        headers: { 'content-type': contentType },
        limits: { fileSize: importFileMaxBytes + 1, files: 5, fields: 20, parts: 25, fieldSize: 64 * 1024 },
      });
    } catch (err) {
      return reject(malformed(err));
    }
    let found: FilePart | undefined;
    let tooLarge = false;
    parser.on('file', (name, stream, info) => {
      // A broken body fails the file stream as well as the parser; the parser's error answers the request.
      stream.on('error', () => {});
      if (name !== importFieldName || found) return void stream.resume();
      const part: FilePart = {
        filename: info.filename ?? '',
        mimeType: (info.mimeType ?? '').toLowerCase(),
        chunks: [],
      };
      found = part;
      // Busboy hands out views of `raw` where it can: keeping them costs no copy of the file.
      stream.on('data', (chunk: Buffer) => part.chunks.push(chunk));
      stream.on('limit', () => {
        tooLarge = true;
      });
    });
    parser.on('error', (err) => reject(malformed(err)));
    parser.on('close', () => {
      if (tooLarge)
        return reject(
          new AppError('payload_too_large', `the import file is larger than ${importFileMaxBytes} bytes (10 MiB)`),
        );
      if (!found) {
        return reject(
          new AppError(
            'validation_error',
            `${importFieldName}: is required (a multipart file field named "${importFieldName}")`,
            { details: [{ path: pointer(importFieldName), message: 'is required' }] },
          ),
        );
      }
      resolve(found);
    });
    parser.end(raw);
  });
}

/** By extension, then by the part's content type, then (for a generic type only) by the first bytes. */
function detectFormat(part: FilePart): ImportFormat | undefined {
  const ext = extname(part.filename).toLowerCase();
  if (ext === '.csv') return 'csv';
  if (ext === '.json') return 'json';
  const type = part.mimeType.split(';')[0]!.trim();
  if (csvTypes.has(type)) return 'csv';
  if (type === 'application/json' || type.endsWith('+json')) return 'json';
  if (!genericTypes.has(type)) return undefined;
  const head = Buffer.concat(part.chunks.slice(0, 4))
    .subarray(0, sniffBytes)
    .toString('utf8')
    .replace(/^\uFEFF/, '');
  const first = head.trimStart()[0];
  if (first === '[' || first === '{') return 'json';
  const firstLine = head.split(/\r?\n/)[0] ?? '';
  if (!/[\u0000-\u0008\u000e-\u001f\ufffd]/.test(firstLine) && looksLikeHeader(firstLine)) return 'csv';
  return undefined;
}

function malformed(err: unknown): AppError {
  const reason = err instanceof Error ? err.message : 'unreadable';
  return new AppError('validation_error', `the multipart body is malformed: ${reason}`, {
    details: [{ path: '', message: reason }],
  });
}
