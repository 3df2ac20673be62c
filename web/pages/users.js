// The tenant's users: everyone sees who is in it; owners and admins invite people (a one-time
// link, shown once, to pass on: Einsora sends no e-mail), change roles, disable, enable and
// remove users, and make password-reset links. An admin manages members only.

import { api } from '../api.js';
import { h, errorBox, field, select, shownOnce, table } from '../dom.js';
import { time } from '../format.js';

const ROLES = [
  { value: 'member', text: 'Member' },
  { value: 'admin', text: 'Admin' },
  { value: 'owner', text: 'Owner' },
];

/**
 * Whether a user of role `by` manages users of role `target` (the API decides; this only
 * hides what it would refuse).
 * @param {string} by
 * @param {string} target
 */
function manages(by, target) {
  return by === 'owner' || (by === 'admin' && target === 'member');
}

/** @type {import('../app.js').Page['render']} */
export function render(main) {
  const rows = h('tbody');
  const inviteRows = h('tbody');
  const listProblem = h('div', { class: 'problem' });
  const formProblem = h('div', { class: 'problem' });
  const shown = h('div', { class: 'created' });
  const admin = h('div');
  let stopped = false;
  /** @type {any} */
  let me = null;

  async function refresh() {
    try {
      me = me ?? (await api.get('/v1/me'));
      const answer = await api.get('/v1/users');
      if (stopped) return;
      draw(answer.users ?? []);
      if (manages(me.role, 'member')) {
        const invites = await api.get('/v1/invites');
        if (!stopped) drawInvites(invites.invites ?? []);
      }
    } catch (error) {
      if (!stopped) listProblem.replaceChildren(errorBox(error));
    }
  }

  /**
   * @param {string} label
   * @param {() => Promise<unknown>} act
   * @param {string} [klass]
   */
  function action(label, act, klass = 'secondary small') {
    const button = h('button', { type: 'button', class: klass }, label);
    button.addEventListener('click', async () => {
      listProblem.replaceChildren();
      button.disabled = true;
      try {
        await act();
      } catch (error) {
        listProblem.replaceChildren(errorBox(error));
      }
      await refresh();
    });
    return button;
  }

  /** @param {any[]} users */
  function draw(users) {
    listProblem.replaceChildren();
    rows.replaceChildren(
      ...users.map((u) => {
        const mine = u.id === me.user_id;
        const canManage = !mine && manages(me.role, u.role);
        const update = (/** @type {any} */ body) =>
          api.patch('/v1/users/{id}', body, { params: { id: u.id } });
        /** @type {Node[]} */
        const actions = [];
        if (canManage) {
          const role = select(`role-${u.id}`, ROLES.filter((r) => manages(me.role, r.value)), u.role);
          role.setAttribute('aria-label', `Role of ${u.email}`);
          role.addEventListener('change', async () => {
            listProblem.replaceChildren();
            try {
              await update({ role: /** @type {'member' | 'admin' | 'owner'} */ (role.value) });
            } catch (error) {
              listProblem.replaceChildren(errorBox(error));
            }
            await refresh();
          });
          actions.push(role);
          actions.push(
            u.disabled_at
              ? action('Enable', () => update({ disabled: false }))
              : action('Disable', () => update({ disabled: true }), 'danger small'),
          );
          actions.push(
            action('Reset password', async () => {
              const answer = await api.post('/v1/users/{id}/password-reset', {}, { params: { id: u.id } });
              shown.replaceChildren(oneTimeLink('reset', answer.secret, `A password reset for ${u.email}`));
            }),
          );
          actions.push(
            action('Remove', () => api.delete('/v1/users/{id}', { params: { id: u.id } }), 'danger small'),
          );
        }
        return h(
          'tr',
          {},
          h('th', { scope: 'row' }, u.email, mine ? h('span', { class: 'muted' }, ' (you)') : null),
          h('td', {}, u.display_name),
          h('td', {}, canManage ? actions.shift() : u.role),
          h('td', {}, u.disabled_at ? h('span', { class: 'muted' }, 'Disabled ', time(u.disabled_at)) : 'Active'),
          h('td', {}, actions),
        );
      }),
    );
  }

  /** @param {any[]} invites */
  function drawInvites(invites) {
    inviteRows.replaceChildren(
      ...invites.map((i) => {
        const state = i.used_at
          ? h('span', { class: 'muted' }, 'Accepted ', time(i.used_at))
          : i.revoked_at
            ? h('span', { class: 'muted' }, 'Revoked ', time(i.revoked_at))
            : new Date(i.expires_at) < new Date()
              ? h('span', { class: 'muted' }, 'Expired')
              : action('Revoke', () => api.delete('/v1/invites/{id}', { params: { id: i.id } }), 'danger small');
        return h(
          'tr',
          {},
          h('th', { scope: 'row' }, i.email),
          h('td', {}, i.role),
          h('td', {}, time(i.created_at)),
          h('td', {}, time(i.expires_at)),
          h('td', {}, state),
        );
      }),
    );
  }

  const email = h('input', { id: 'invite-email', type: 'email', name: 'email', required: true, autocomplete: 'off' });
  const role = select('invite-role', ROLES, 'member');
  const submit = h('button', { type: 'submit' }, 'Create invite link');
  const form = h(
    'form',
    { class: 'stack', novalidate: true },
    field('Their email', email, 'They sign in with it; no account may have it yet.'),
    field('Role', role, 'An admin invites members only.'),
    formProblem,
    h('div', { class: 'actions' }, submit),
  );
  form.addEventListener('submit', async (event) => {
    event.preventDefault();
    formProblem.replaceChildren();
    shown.replaceChildren();
    submit.disabled = true;
    try {
      const chosen = /** @type {'member' | 'admin' | 'owner'} */ (role.value);
      const answer = await api.post('/v1/invites', { email: email.value.trim(), role: chosen });
      shown.replaceChildren(oneTimeLink('invite', answer.secret, `An invite for ${answer.invite?.email ?? ''}`));
      email.value = '';
      await refresh();
    } catch (error) {
      formProblem.replaceChildren(errorBox(error));
    } finally {
      submit.disabled = false;
    }
  });

  main.append(
    h('h1', { tabindex: -1 }, 'Users'),
    h(
      'p',
      {},
      'Members launch workloads and see their own; admins manage members, machines and enrolment; owners manage everyone.',
    ),
    admin,
    listProblem,
    shown,
    table('Users of your tenant', ['Email', 'Name', 'Role', 'Status', 'Actions'], rows),
  );
  api.get('/v1/me').then((found) => {
    me = found;
    if (stopped || !manages(me.role, 'member')) return;
    admin.replaceChildren(
      h('section', { class: 'card', 'aria-labelledby': 'new-invite' }, h('h2', { id: 'new-invite' }, 'Invite someone'), form),
    );
    main.append(h('h2', {}, 'Invites'), table('Invites', ['Email', 'Role', 'Created', 'Expires', 'State'], inviteRows));
  }, () => {});
  refresh();
  return () => {
    stopped = true;
  };
}

/**
 * A one-time link, shown this once: the dashboard page that takes its secret.
 * @param {'invite' | 'reset'} kind
 * @param {string} secret
 * @param {string} what
 * @returns {HTMLElement}
 */
function oneTimeLink(kind, secret, what) {
  const link = `${location.origin}/#/${kind}/${secret}`;
  const lead = h(
    'p',
    {},
    h('strong', {}, what),
    ' \u2014 copy the link now and pass it on privately: it is shown only once, works once, and Einsora sends no e-mail.',
  );
  return shownOnce([lead], link, 'link');
}
