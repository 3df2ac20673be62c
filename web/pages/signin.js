// Sign in with the owner's (or any local account's) email and password. There is no sign-up
// page: the owner account is made in the terminal by `einsora up` (or `einsora setup`), and
// everyone else joins with an invite link (pages/link.js).

import { api } from '../api.js';
import { h, errorBox, field } from '../dom.js';

/** @type {import('../app.js').Page['render']} */
export function render(main, _params, context) {
  const email = h('input', { id: 'signin-email', type: 'email', name: 'email', autocomplete: 'username', required: true });
  const password = h('input', {
    id: 'signin-password',
    type: 'password',
    name: 'password',
    autocomplete: 'current-password',
    required: true,
  });
  const submit = h('button', { type: 'submit' }, 'Sign in');
  const problem = h('div', { class: 'problem' });
  const form = h(
    'form',
    { class: 'stack', novalidate: true },
    field('Email', email),
    field('Password', password),
    problem,
    submit,
  );
  form.addEventListener('submit', async (event) => {
    event.preventDefault();
    problem.replaceChildren();
    submit.disabled = true;
    try {
      const session = await api.post('/v1/sessions', { email: email.value.trim(), password: password.value });
      context.signedIn(session);
    } catch (error) {
      problem.replaceChildren(errorBox(error));
      password.select();
    } finally {
      submit.disabled = false;
    }
  });
  main.append(
    h(
      'section',
      { class: 'card narrow' },
      h('h1', { tabindex: -1 }, 'Sign in'),
      context.notice ? h('p', { class: 'notice' }, context.notice) : null,
      form,
      h(
        'p',
        { class: 'hint' },
        'The owner account is created by ',
        h('code', {}, 'einsora up'),
        ' in the terminal. ',
        'Invited? Open the link you were given. ',
        'Forgot the password? Ask an admin for a reset link; the owner can run ',
        h('code', {}, 'einsora setup --email <email> --password-stdin --reset-password'),
        ' there.',
      ),
    ),
  );
  email.focus();
}
