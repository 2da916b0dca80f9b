import { announce, h, replace, table, when } from '../dom.ts';
import { api, can, describeError } from '../session.ts';
import type { PageContext } from '../page.ts';

interface User {
  id: string;
  email: string;
  role: string;
  createdAt: string;
}
interface Team {
  id: string;
  name: string;
  createdAt: string;
}

const roles = ['viewer', 'member', 'admin', 'owner'];

/**
 * The organization's members and teams. Admins add a member (an account with
 * a first password and a role, to hand over), change a member's role or
 * remove one (not one above their own role), and create teams; other roles
 * read the lists.
 */
export async function membersView(ctx: PageContext): Promise<void> {
  const { me, main } = ctx;
  const [members, teams] = await Promise.all([
    api<{ data: User[] }>('GET', '/api/v1/members'),
    api<{ data: Team[] }>('GET', '/api/v1/teams'),
  ]);
  const admin = can(me, 'admin');
  const again = () => membersView(ctx);

  const email = h('input', { id: 'member-email', type: 'email', required: true, autocomplete: 'off' });
  const password = h('input', {
    id: 'member-password',
    type: 'password',
    required: true,
    minlength: '10',
    autocomplete: 'new-password',
    'aria-describedby': 'member-password-hint',
  });
  // Only an owner may make an owner.
  const role = h(
    'select',
    { id: 'member-role' },
    roles
      .filter((r) => r !== 'owner' || me.role === 'owner')
      .map((r) => h('option', { value: r, selected: r === 'member' }, r)),
  );
  const memberError = h('p', { class: 'error', role: 'alert' });
  const invite = h(
    'form',
    {
      id: 'invite-member',
      async onsubmit(e: Event) {
        e.preventDefault();
        try {
          await api('POST', '/api/v1/members', {
            email: email.value.trim(),
            password: password.value,
            role: role.value,
          });
          announce(`${email.value.trim()} added as ${role.value}`);
          await again();
        } catch (err) {
          memberError.textContent = describeError(err);
        }
      },
    },
    h('div', { class: 'field' }, h('label', { for: 'member-email' }, 'Email'), email),
    h(
      'div',
      { class: 'field' },
      h('label', { for: 'member-password' }, 'First password'),
      password,
      h(
        'span',
        { class: 'hint', id: 'member-password-hint' },
        'At least 10 characters; give it to them over a channel you trust.',
      ),
    ),
    h('div', { class: 'field' }, h('label', { for: 'member-role' }, 'Role'), role),
    memberError,
    h('button', { type: 'submit' }, 'Add member'),
  );

  const manageError = h('p', { class: 'error', role: 'alert', id: 'manage-member-error' });
  const manage = async (action: () => Promise<unknown>, done: string) => {
    try {
      await action();
      announce(done);
      await again();
    } catch (err) {
      manageError.textContent = describeError(err);
    }
  };
  // Nobody manages a member above their own role.
  const manageable = (u: User) => admin && roles.indexOf(u.role) <= roles.indexOf(me.role);
  const actions = (u: User) => {
    if (!manageable(u)) return '';
    const next = h(
      'select',
      { 'aria-label': `New role for ${u.email}` },
      roles
        .filter((r) => roles.indexOf(r) <= roles.indexOf(me.role))
        .map((r) => h('option', { value: r, selected: r === u.role }, r)),
    );
    return h(
      'span',
      { class: 'actions' },
      next,
      h(
        'button',
        {
          type: 'button',
          'aria-label': `Change the role of ${u.email}`,
          onclick: () =>
            manage(
              () => api('PATCH', `/api/v1/members/${u.id}`, { role: next.value }),
              `${u.email} is now ${next.value}`,
            ),
        },
        'Change the role',
      ),
      h(
        'button',
        {
          type: 'button',
          'aria-label': `Remove ${u.email}`,
          onclick: () =>
            confirm(`Remove ${u.email}? Their sessions and sign-in end at once.`) &&
            manage(() => api('DELETE', `/api/v1/members/${u.id}`), `${u.email} removed`),
        },
        'Remove',
      ),
    );
  };

  const teamName = h('input', { id: 'team-name', required: true, maxlength: '200' });
  const teamError = h('p', { class: 'error', role: 'alert' });
  const newTeam = h(
    'form',
    {
      id: 'new-team',
      async onsubmit(e: Event) {
        e.preventDefault();
        try {
          await api('POST', '/api/v1/teams', { name: teamName.value.trim() });
          announce(`Team ${teamName.value.trim()} created`);
          await again();
        } catch (err) {
          teamError.textContent = describeError(err);
        }
      },
    },
    h('div', { class: 'field' }, h('label', { for: 'team-name' }, 'Team name'), teamName),
    teamError,
    h('button', { type: 'submit' }, 'Create team'),
  );

  replace(
    main,
    h('h1', null, 'Members and teams'),
    h('h2', null, 'Members'),
    table(
      'Members of the organization',
      admin ? ['Email', 'Role', 'Added', 'Manage'] : ['Email', 'Role', 'Added'],
      members.data.map((u) =>
        admin ? [u.email, u.role, when(u.createdAt), actions(u)] : [u.email, u.role, when(u.createdAt)],
      ),
    ),
    admin ? manageError : null,
    h(
      'p',
      { class: 'hint' },
      'Roles: viewers read; members also send; admins also manage automations, webhooks, relays, keys and members; owners everything.',
    ),
    admin
      ? h('section', { 'aria-labelledby': 'add-member' }, h('h3', { id: 'add-member' }, 'Add a member'), invite)
      : null,
    h('h2', null, 'Teams'),
    table(
      'Teams of the organization',
      ['Name', 'Created'],
      teams.data.map((t) => [t.name, when(t.createdAt)]),
    ),
    admin
      ? h('section', { 'aria-labelledby': 'add-team' }, h('h3', { id: 'add-team' }, 'New team'), newTeam)
      : h('p', { class: 'hint' }, 'Admins and owners add members and teams.'),
  );
}
