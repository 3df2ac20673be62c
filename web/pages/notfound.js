// A path the dashboard doesn't have.

import { h } from '../dom.js';

/** @type {import('../app.js').Page['render']} */
export function render(main) {
  main.append(
    h('h1', { tabindex: -1 }, 'Page not found'),
    h('p', {}, 'The dashboard has no page at this address; the navigation above has every page.'),
  );
}
