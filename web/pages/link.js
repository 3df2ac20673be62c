// The page an invite or a password-reset link opens (`/#/invite/<secret>`, `/#/reset/<secret>`):
// the secret stays in the URL's fragment, which the browser never sends to a server, and is
// taken from the address bar as soon as the page has it. The person sets a password (and, when
// joining, their name), then signs in.

import { api } from '../api.js';
import { h, errorBox, field } from '../dom.js';

/** @type {import('../app.js').Page['render']} */
export function render(main, params, context) {
  const [kind, secret] = params;
  const joining = kind === 'invite';
  // Out of the address bar and the history: the secret works once, and this page has it now.
  history.replaceState(null, '', '/');
  const name = h('input', { id: 'link-name', name: 'name', autocomplete: 'name', maxlength: 64 });
  const password = h('input', {
    id: 'link-password',
    type: 'password',
    name: 'password',
    autocomplete: 'new-password',
    minlength: 12,
    required: true,
  });
  const again = h('input', {
    id: 'link-password-again',
    type: 'password',
    name: 'password-again',
    autocomplete: 'new-password',
    required: true,
  });
  const submit = h('button', { type: 'submit' }, joining ? 'Join' : 'Set password');
  const problem = h('div', { class: 'problem' });
  const form = h(
    'form',
    { class: 'stack', novalidate: true },
    joining ? field('Your name', name, 'How others in your team see you; your email\u2019s first part if empty.') : null,
    field('Password', password, 'At least 12 characters.'),
    field('Password again', again),
    problem,
    submit,
  );
  form.addEventListener('submit', async (event) => {
    event.preventDefault();
    problem.replaceChildren();
    if (password.value !== again.value) {
      problem.replaceChildren(h('p', { role: 'alert' }, 'The two passwords differ.'));
      again.select();
      return;
    }
    submit.disabled = true;
    try {
      if (joining) {
        const joined = await api.post('/v1/invites/accept', {
          secret,
          display_name: name.value.trim(),
          password: password.value,
        });
        context.navigate('/signin');
        showNotice(`Welcome to ${joined.tenant_name}: sign in as ${joined.user?.email ?? ''}.`);
      } else {
        const reset = await api.post('/v1/password-resets/accept', { secret, password: password.value });
        context.navigate('/signin');
        showNotice(`The password of ${reset.email} is set: sign in with it.`);
      }
    } catch (error) {
      problem.replaceChildren(errorBox(error));
      submit.disabled = false;
    }
  });
  main.append(
    h(
      'section',
      { class: 'card narrow' },
      h('h1', { tabindex: -1 }, joining ? 'Join Einsora' : 'Set a new password'),
      h(
        'p',
        {},
        joining
          ? 'You were invited to a team on this Einsora. Choose a password to create your account.'
          : 'Choose a new password. Your other sessions end when it is set.',
      ),
      form,
    ),
  );
  (joining ? name : password).focus();
}

/**
 * Puts `text` at the top of the sign-in page just shown.
 * @param {string} text
 */
function showNotice(text) {
  const card = document.querySelector('main .card');
  card?.querySelector('h1')?.after(h('p', { class: 'notice', role: 'status' }, text));
}
