/**
 * The signed-in session. The access token lives only in this module's memory
 * and is refreshed a minute before it expires; the refresh token is an
 * HttpOnly cookie that page script can neither read nor send anywhere but
 * the session routes of this origin.
 */
export interface Team {
  id: string;
  name: string;
}
export interface Me {
  user: { id: string; email: string; role: Role } | null;
  organization: { id: string; name: string; defaultTeamId: string } | null;
  role: Role;
  /** False while the dashboard shows the organization's test data. */
  livemode: boolean;
  teams: Team[];
}
export type Role = 'owner' | 'admin' | 'member' | 'viewer';

const roleRank: Record<Role, number> = { viewer: 0, member: 1, admin: 2, owner: 3 };
export const can = (me: Me, needed: Role) => roleRank[me.role] >= roleRank[needed];

export class ApiError extends Error {
  constructor(
    readonly status: number,
    readonly code: string,
    message: string,
    readonly details: Array<{ path: string; message: string }> = [],
  ) {
    super(message);
  }
}

/** An error as a reader sees it: the problem's message with the fields it names. */
export function describeError(err: unknown): string {
  return err instanceof ApiError && err.details.length
    ? `${err.message}: ${err.details.map((d) => `${d.path} ${d.message}`).join('; ')}`
    : (err as Error).message;
}

interface Grant {
  accessToken: string;
  expiresIn: number;
}

let accessToken: string | undefined;
let refreshTimer: ReturnType<typeof setTimeout> | undefined;
let teamId: string | undefined;
/** Whether this tab shows the organization's test data (docs/test-mode.md); kept for the tab's life. */
const testModeKey = 'relaybox-test-mode';
let testMode = sessionStorage.getItem(testModeKey) === 'test';
let onSignedOut: () => void = () => {};

export const session = {
  get signedIn() {
    return accessToken !== undefined;
  },
  get teamId() {
    return teamId;
  },
  set teamId(id: string | undefined) {
    teamId = id;
  },
  get testMode() {
    return testMode;
  },
  set testMode(on: boolean) {
    testMode = on;
    if (on) sessionStorage.setItem(testModeKey, 'test');
    else sessionStorage.removeItem(testModeKey);
  },
  whenSignedOut(fn: () => void) {
    onSignedOut = fn;
  },
};

async function sessionCall(path: string, body: unknown): Promise<Response> {
  return fetch(`/api/v1/auth/session${path}`, {
    method: 'POST',
    credentials: 'same-origin',
    headers: { 'content-type': 'application/json', 'x-relaybox-session': '1' },
    body: JSON.stringify(body),
  });
}

/**
 * A cookie page script can read, holding no secret, that says this browser
 * signed in (the refresh cookie itself is HttpOnly): without it a page load
 * does not ask to refresh, so a signed-out visit makes no failing request.
 * It lasts as long as a refresh token does by default (30 days).
 */
const hintCookie = 'relaybox_signed_in';
function setHint(on: boolean): void {
  const secure = location.protocol === 'https:' ? '; Secure' : '';
  document.cookie = `${hintCookie}=${on ? '1' : ''}; Path=/; SameSite=Strict; Max-Age=${on ? 30 * 86_400 : 0}${secure}`;
}
const hinted = () => document.cookie.split(';').some((c) => c.trim() === `${hintCookie}=1`);

function hold(grant: Grant): void {
  accessToken = grant.accessToken;
  setHint(true);
  clearTimeout(refreshTimer);
  const inMs = Math.max(5_000, (grant.expiresIn - 60) * 1000);
  refreshTimer = setTimeout(() => void resume().then((ok) => ok || signedOut()), inMs);
}

function signedOut(): void {
  accessToken = undefined;
  setHint(false);
  clearTimeout(refreshTimer);
  onSignedOut();
}

async function grantOrThrow(res: Response): Promise<void> {
  if (!res.ok) throw await errorOf(res);
  hold((await res.json()) as Grant);
}

export async function signIn(email: string, password: string): Promise<void> {
  await grantOrThrow(await sessionCall('', { email, password }));
}

export async function signUp(organizationName: string, email: string, password: string): Promise<void> {
  await grantOrThrow(await sessionCall('/signup', { organizationName, email, password }));
}

/** Picks the session up from the cookie (page load, timer); false when there is none. */
let resuming: Promise<boolean> | undefined;
export function resume(): Promise<boolean> {
  if (!hinted()) return Promise.resolve(false);
  resuming ??= (async () => {
    try {
      const res = await sessionCall('/refresh', {});
      if (!res.ok) {
        setHint(false);
        return false;
      }
      hold((await res.json()) as Grant);
      return true;
    } catch {
      return false;
    } finally {
      resuming = undefined;
    }
  })();
  return resuming;
}

export async function signOut(): Promise<void> {
  await sessionCall('/logout', {}).catch(() => undefined);
  teamId = undefined;
  signedOut();
}

async function errorOf(res: Response): Promise<ApiError> {
  const body = (await res.json().catch(() => ({}))) as {
    error?: string;
    message?: string;
    details?: Array<{ path: string; message: string }>;
  };
  return new ApiError(
    res.status,
    body.error ?? 'error',
    body.message ?? `${res.status} ${res.statusText}`,
    body.details,
  );
}

/** Calls the API as the signed-in user, in the chosen team; a 401 tries one refresh before giving up. */
export async function api<T = any>(method: string, path: string, body?: unknown): Promise<T> {
  return (await apiAnswer<T>(method, path, body)).body;
}

/** As `api`, with the answer's headers (the rate limit in force, for one). */
export async function apiAnswer<T = any>(
  method: string,
  path: string,
  body?: unknown,
  retried = false,
): Promise<{ body: T; headers: Headers }> {
  const headers: Record<string, string> = {};
  if (accessToken) headers.authorization = `Bearer ${accessToken}`;
  if (teamId) headers['x-team-id'] = teamId;
  if (testMode) headers['x-relaybox-mode'] = 'test';
  if (body !== undefined) headers['content-type'] = 'application/json';
  const res = await fetch(path, { method, headers, body: body === undefined ? undefined : JSON.stringify(body) });
  if (res.status === 401 && !retried) {
    if (await resume()) return apiAnswer(method, path, body, true);
    signedOut();
  }
  // Over the request budget: a read waits out a short Retry-After once (a write is never sent twice).
  const wait = Number(res.headers.get('retry-after'));
  if (res.status === 429 && method === 'GET' && !retried && wait > 0 && wait <= 10) {
    await new Promise((r) => setTimeout(r, wait * 1000));
    return apiAnswer(method, path, body, true);
  }
  if (!res.ok) throw await errorOf(res);
  if (res.status === 204) return { body: undefined as T, headers: res.headers };
  return { body: (await res.json()) as T, headers: res.headers };
}

/** Every page of a list (limit 100 a page). */
export async function allPages<T>(path: string, max = 100): Promise<T[]> {
  const out: T[] = [];
  const sep = path.includes('?') ? '&' : '?';
  for (let page = 1; page <= max; page++) {
    const answer = await api<{ data: T[]; pagination: { totalPages: number } }>(
      'GET',
      `${path}${sep}page=${page}&limit=100`,
    );
    out.push(...answer.data);
    if (page >= answer.pagination.totalPages) break;
  }
  return out;
}
