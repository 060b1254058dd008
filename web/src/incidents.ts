/**
 * Incidents (#/incidents): the incident files the daemon serves, dropped into
 * its data dir's incidents/ folder or uploaded here, each opening its
 * transaction's timeline (where it replays like any); files it skipped, with why.
 */
import { listIncidents, uploadIncident, type IncidentList } from './api';
import { escapeHtml } from './format';

function rows(list: IncidentList): string {
  if (list.incidents.length === 0)
    return "<p>No incident files: drop .kri files into the data dir's incidents/ folder, or upload one.</p>";
  const body = list.incidents
    .map(
      (i) => `<tr>
        <td><a href="#/txn/${encodeURIComponent(i.transaction_id)}">${escapeHtml(i.transaction_id)}</a></td>
        <td>${escapeHtml(i.file)}</td>
        <td>${i.origin}</td>
        <td>${i.events}</td>
        <td>${escapeHtml(i.exported_at)}</td>
        <td>${i.runs === null ? 'unknown' : `${i.runs} run${i.runs === 1 ? '' : 's'}`}</td>
        <td>${i.redacted.length ? escapeHtml(i.redacted.join(', ')) : 'no'}</td>
        <td title="${escapeHtml(i.digest)}">${escapeHtml(i.id)}</td>
      </tr>`,
    )
    .join('');
  return `<table class="incidents"><thead><tr><th>Transaction</th><th>File</th><th>Origin</th><th>Events</th><th>Exported</th><th>Completeness</th><th>Redacted</th><th>Id</th></tr></thead><tbody>${body}</tbody></table>`;
}

function skipped(list: IncidentList): string {
  if (list.skipped.length === 0) return '';
  return `<h3>Skipped</h3><ul class="error">${list.skipped
    .map((s) => `<li>${escapeHtml(s.reason)}</li>`)
    .join('')}</ul>`;
}

export function renderIncidents(root: HTMLElement): void {
  root.innerHTML = `
    <form class="filters" id="upload">
      <label>Incident file<input type="file" name="file" accept=".kri"></label>
      <button type="submit">Upload</button>
    </form>
    <p id="incidents-error" class="error" role="alert"></p>
    <div id="incidents"></div>`;
  const error = root.querySelector<HTMLElement>('#incidents-error')!;
  const list = root.querySelector<HTMLElement>('#incidents')!;
  const show = async () => {
    try {
      const found = await listIncidents();
      list.innerHTML = rows(found) + skipped(found);
      error.textContent = '';
    } catch (err) {
      error.textContent = (err as Error).message;
    }
  };
  root.querySelector<HTMLFormElement>('#upload')!.addEventListener('submit', (ev) => {
    ev.preventDefault();
    const file = (ev.target as HTMLFormElement).querySelector<HTMLInputElement>('input[type=file]')!
      .files?.[0];
    if (!file) return;
    uploadIncident(file)
      .then(show)
      .catch((err: Error) => (error.textContent = err.message));
  });
  void show();
}
