/**
 * The bearer token of a daemon started with --tokens: typed once per tab
 * into the header and kept in sessionStorage (gone with the tab, never in a
 * URL or on disk), sent with every API request and stream. A daemon without
 * tokens needs none: the field stays empty.
 */
const KEY = 'kreplay-token';

export function authHeaders(): Record<string, string> {
  const token = sessionStorage.getItem(KEY);
  return token ? { authorization: `Bearer ${token}` } : {};
}

export const hasToken = (): boolean => sessionStorage.getItem(KEY) !== null;

/** Wires the header's token form; `changed` runs after a token is set or forgotten. */
export function tokenForm(form: HTMLFormElement, changed: () => void): void {
  const input = form.querySelector<HTMLInputElement>('input')!;
  const show = () => {
    form.dataset.set = String(hasToken());
    input.placeholder = hasToken() ? 'token set (empty: forget it)' : 'bearer token (--tokens)';
  };
  form.addEventListener('submit', (ev) => {
    ev.preventDefault();
    const token = input.value.trim();
    if (token) sessionStorage.setItem(KEY, token);
    else sessionStorage.removeItem(KEY);
    input.value = '';
    show();
    changed();
  });
  show();
}
