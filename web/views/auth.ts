import { h, replace } from '../dom.ts';
import { ApiError, signIn, signUp } from '../session.ts';
import { brand } from '../shell.ts';

/** Sign in, or sign up a new organization; both leave the refresh token in an HttpOnly cookie. */
export function authView(root: HTMLElement, signedIn: () => void): void {
  const mode = location.hash === '#/signup' ? 'signup' : 'signin';
  const error = h('p', { class: 'error', role: 'alert', id: 'auth-error' });
  const field = (id: string, label: string, type: string, autocomplete: string, extra: Record<string, unknown> = {}) =>
    h(
      'div',
      { class: 'field' },
      h('label', { for: id }, label),
      h('input', { id, name: id, type, autocomplete, required: true, ...extra }),
    );
  const form = h(
    'form',
    {
      'aria-labelledby': 'auth-title',
      async onsubmit(e: Event) {
        e.preventDefault();
        const data = new FormData(e.target as HTMLFormElement);
        const value = (k: string) => String(data.get(k) ?? '');
        error.textContent = '';
        try {
          if (mode === 'signup') await signUp(value('organization'), value('email'), value('password'));
          else await signIn(value('email'), value('password'));
          if (location.hash === '#/signup' || location.hash === '#/signin') location.hash = '';
          signedIn();
        } catch (err) {
          error.textContent =
            err instanceof ApiError && err.details.length > 0
              ? err.details.map((d) => `${d.path}: ${d.message}`).join('; ')
              : (err as Error).message;
        }
      },
    },
    h('h1', { id: 'auth-title' }, mode === 'signup' ? 'Create your organization' : 'Sign in to Relaybox'),
    mode === 'signup' ? field('organization', 'Organization name', 'text', 'organization') : null,
    field('email', 'Email', 'email', 'username'),
    field(
      'password',
      'Password',
      'password',
      mode === 'signup' ? 'new-password' : 'current-password',
      mode === 'signup' ? { minlength: '10' } : {},
    ),
    error,
    h('button', { type: 'submit' }, mode === 'signup' ? 'Sign up' : 'Sign in'),
    mode === 'signup'
      ? h('p', null, 'Already have an account? ', h('a', { href: '#/signin' }, 'Sign in'))
      : h('p', null, 'New to Relaybox? ', h('a', { href: '#/signup' }, 'Create an organization')),
    h('p', null, h('a', { href: '/docs' }, 'API reference')),
  );
  const main = h('main', { id: 'main', class: 'auth' }, brand(), form);
  replace(root, main, h('p', { id: 'status', role: 'status', 'aria-live': 'polite', class: 'status-line' }));
  root.querySelector<HTMLInputElement>('input')?.focus();
}
