// API tokens (`tsk_…`) for scripts, the CLI and model endpoints: created here (a token can't
// make a token), shown once, listed by name and prefix, revoked at once.

import { api } from '../api.js';
import { h, errorBox, field, select, shownOnce, table } from '../dom.js';
import { time } from '../format.js';

const COLUMNS = ['Name', 'Prefix', 'Created', 'Last used', 'Expires', 'Actions'];
const LIFETIMES = [
  { value: '', text: 'Never' },
  { value: '7', text: '7 days' },
  { value: '30', text: '30 days' },
  { value: '90', text: '90 days' },
  { value: '365', text: '1 year' },
];

/** @type {import('../app.js').Page['render']} */
export function render(main) {
  const rows = h('tbody');
  const empty = h('p', { class: 'empty' }, 'Loading…');
  const listProblem = h('div', { class: 'problem' });
  const formProblem = h('div', { class: 'problem' });
  const created = h('div', { class: 'created' });
  let stopped = false;

  async function refresh() {
    try {
      const answer = await api.get('/v1/tokens');
      if (!stopped) draw(answer.tokens ?? []);
    } catch (error) {
      if (!stopped) listProblem.replaceChildren(errorBox(error));
    }
  }

  /** @param {any[]} tokens */
  function draw(tokens) {
    listProblem.replaceChildren();
    rows.replaceChildren(
      ...tokens.map((t) => {
        const revoke = h('button', { type: 'button', class: 'danger small' }, 'Revoke');
        revoke.addEventListener('click', async () => {
          listProblem.replaceChildren();
          try {
            await api.delete('/v1/tokens/{id}', { params: { id: t.id } });
          } catch (error) {
            listProblem.replaceChildren(errorBox(error));
          }
          await refresh();
          main.querySelector('h1')?.focus();
        });
        return h(
          'tr',
          {},
          h('th', { scope: 'row' }, t.name),
          h('td', {}, h('code', {}, t.prefix)),
          h('td', {}, time(t.created_at)),
          h('td', {}, time(t.last_used_at, 'Never')),
          h('td', {}, time(t.expires_at, 'Never')),
          h('td', {}, t.revoked_at ? h('span', { class: 'muted' }, 'Revoked ', time(t.revoked_at)) : revoke),
        );
      }),
    );
    empty.hidden = tokens.length > 0;
    empty.textContent = 'No API tokens yet.';
  }

  const name = h('input', { id: 'token-name', name: 'name', required: true, autocomplete: 'off', maxlength: 64 });
  const lifetime = select('token-lifetime', LIFETIMES, '');
  const submit = h('button', { type: 'submit' }, 'Create token');
  const form = h(
    'form',
    { class: 'stack', novalidate: true },
    field('Token name', name, 'Where it will be used, e.g. laptop or ci; unique among your live tokens.'),
    field('Expires after', lifetime),
    formProblem,
    h('div', { class: 'actions' }, submit),
  );
  form.addEventListener('submit', async (event) => {
    event.preventDefault();
    formProblem.replaceChildren();
    created.replaceChildren();
    /** @type {import('../api.js').Post['/v1/tokens']['body']} */
    const body = { name: name.value.trim() };
    if (lifetime.value) body.expires_at = new Date(Date.now() + Number(lifetime.value) * 86_400_000).toISOString();
    submit.disabled = true;
    try {
      const answer = await api.post('/v1/tokens', body);
      created.replaceChildren(newToken(answer));
      name.value = '';
      await refresh();
    } catch (error) {
      formProblem.replaceChildren(errorBox(error));
    } finally {
      submit.disabled = false;
    }
  });

  main.append(
    h('h1', { tabindex: -1 }, 'API tokens'),
    h(
      'p',
      {},
      'A token lets a script, the CLI or a model endpoint\u2019s client act as you: send it as ',
      h('code', {}, 'Authorization: Bearer tsk_…'),
      '. It can\u2019t create tokens or change your password.',
    ),
    h('section', { class: 'card', 'aria-labelledby': 'new-token' }, h('h2', { id: 'new-token' }, 'New token'), form, created),
    listProblem,
    table('Your API tokens', COLUMNS, rows),
    empty,
  );
  refresh();
  return () => {
    stopped = true;
  };
}

/**
 * The new token, shown this once.
 * @param {any} answer
 * @returns {HTMLElement}
 */
function newToken(answer) {
  const lead = h('p', {}, h('strong', {}, `Your new token ${answer.api_token?.name ?? ''}`), ' \u2014 copy it now: it is shown only once.');
  return shownOnce([lead], answer.token, 'token');
}
