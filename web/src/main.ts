/** The page's router: #/search?…, #/txn/ID?… and #/incidents; every view is a URL. */
import './style.css';
import { tokenForm } from './auth';
import { renderIncidents } from './incidents';
import { renderSearch } from './search';
import { renderTransaction } from './txn';

const app = document.getElementById('app')!;
let cleanup: () => void = () => undefined;
let shown = '';

function navigate(hash: string): void {
  if (location.hash === hash) void route();
  else location.hash = hash;
}

async function route(): Promise<void> {
  const hash = location.hash || '#/search';
  const [path = '', query = ''] = hash.slice(1).split('?', 2);
  const params = new URLSearchParams(query);
  const txn = /^\/txn\/(.+)$/.exec(path);
  // a view that only rewrote its own from/to/session in the URL is not reloaded
  const key = txn ? `txn ${txn[1]}` : `${path}?${query}`;
  if (key === shown && txn) return;
  shown = key;
  cleanup();
  cleanup = () => undefined;
  document.body.dataset.view = txn ? 'txn' : path === '/incidents' ? 'incidents' : 'search';
  if (txn) cleanup = await renderTransaction(app, decodeURIComponent(txn[1]!), params);
  else if (path === '/incidents') renderIncidents(app);
  else renderSearch(app, params, navigate);
  document.body.dataset.ready = 'true';
}

window.addEventListener('hashchange', () => void route());
// a new token: draw the view again with it
tokenForm(document.querySelector<HTMLFormElement>('#token-form')!, () => {
  shown = '';
  void route();
});
void route();
