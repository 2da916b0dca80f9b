import { createHmac, timingSafeEqual } from 'node:crypto';
import { extname } from 'node:path';

const mimeTypes: Record<string, string> = {
  '.jpg': 'image/jpeg',
  '.jpeg': 'image/jpeg',
  '.png': 'image/png',
  '.gif': 'image/gif',
  '.heic': 'image/heic',
  '.webp': 'image/webp',
  '.mp4': 'video/mp4',
  '.mov': 'video/quicktime',
  '.mp3': 'audio/mpeg',
  '.m4a': 'audio/mp4',
  '.caf': 'audio/x-caf',
  '.pdf': 'application/pdf',
  '.txt': 'text/plain',
  '.vcf': 'text/vcard',
  '.zip': 'application/zip',
};

export const attachmentLinkTtlMs = 3600 * 1000;

/** The media type a file's name suggests; `application/octet-stream` when it suggests none. */
export function mimeTypeOf(filename: string): string {
  return mimeTypes[extname(filename).toLowerCase()] ?? 'application/octet-stream';
}

interface LinkClaims {
  /** organization, message, attachment index, expiry (epoch seconds) */
  o: string;
  m: string;
  i: number;
  e: number;
}

/** Signed, expiring download links for message attachments (decisions: valid 1 hour). */
export class AttachmentLinks {
  constructor(
    private readonly secret: Buffer,
    private readonly now: () => number = Date.now,
  ) {}

  /** The entries of a sent message's attachments (the URLs it was sent with): each ready, its link redirecting to its URL. */
  entries(base: string, tenantId: string, messageId: string, urls: string[]) {
    return urls.map((source, i) => {
      const filename = lastSegment(source) || `attachment-${i + 1}`;
      return {
        id: `${messageId}.${i}`,
        ...this.link(base, tenantId, messageId, i),
        filename,
        mimeType: mimeTypeOf(filename),
        size: null as number | null,
        status: 'ready' as const,
      };
    });
  }

  /** A signed download link of a message's `index`th attachment, valid `attachmentLinkTtlMs`. */
  link(base: string, tenantId: string, messageId: string, index: number): { url: string; expiresAt: string } {
    const expires = Math.floor((this.now() + attachmentLinkTtlMs) / 1000);
    const token = this.sign({ o: tenantId, m: messageId, i: index, e: expires });
    return { url: `${base}/api/v1/attachments/${token}`, expiresAt: new Date(expires * 1000).toISOString() };
  }

  private sign(claims: LinkClaims): string {
    const payload = Buffer.from(JSON.stringify(claims)).toString('base64url');
    return `${payload}.${this.mac(payload)}`;
  }

  /** The claims of a genuine, unexpired token; undefined otherwise. */
  verify(token: string): LinkClaims | undefined {
    const [payload, mac] = token.split('.');
    if (!payload || !mac) return undefined;
    const expected = Buffer.from(this.mac(payload));
    const given = Buffer.from(mac);
    if (expected.length !== given.length || !timingSafeEqual(expected, given)) return undefined;
    try {
      const claims = JSON.parse(Buffer.from(payload, 'base64url').toString()) as LinkClaims;
      return claims.e * 1000 > this.now() ? claims : undefined;
    } catch {
      return undefined;
    }
  }

  private mac(payload: string): string {
    return createHmac('sha256', this.secret).update(payload).digest('base64url');
  }
}

/** A URL's last path segment, decoded when it can be (a malformed escape stays as it is). */
function lastSegment(url: string): string {
  const segment = new URL(url).pathname.split('/').pop() ?? '';
  try {
    return decodeURIComponent(segment);
  } catch {
    return segment;
  }
}
