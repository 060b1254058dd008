/** Times and sizes as people read them. */

/** A duration in ns (a float is fine: these are offsets and spans) with a unit that fits. */
export function formatDuration(ns: number): string {
  const abs = Math.abs(ns);
  if (abs < 1e3) return `${ns.toFixed(0)} ns`;
  if (abs < 1e6) return `${(ns / 1e3).toFixed(abs < 1e4 ? 2 : 1)} µs`;
  if (abs < 1e9) return `${(ns / 1e6).toFixed(abs < 1e7 ? 3 : 2)} ms`;
  return `${(ns / 1e9).toFixed(3)} s`;
}

/** Epoch ns (exact, as a bigint) as RFC 3339 UTC with all nine digits. */
export function formatTime(ns: bigint): string {
  const seconds = ns / 1_000_000_000n;
  const fraction = (ns % 1_000_000_000n).toString().padStart(9, '0');
  return `${new Date(Number(seconds) * 1000).toISOString().slice(0, 19)}.${fraction}Z`;
}

const RFC3339 = /^\d{4}-\d{2}-\d{2}[Tt]\d{2}:\d{2}:\d{2}(\.\d{1,9})?([Zz]|[+-]\d{2}:\d{2})$/;

/** True for what the API's from/to take: epoch ns or RFC 3339. */
export function isTimeText(text: string): boolean {
  return /^\d{1,19}$/.test(text) || RFC3339.test(text);
}

export function escapeHtml(text: string): string {
  return text.replace(/[&<>"']/g, (c) => `&#${c.charCodeAt(0)};`);
}
