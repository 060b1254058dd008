/** The daemon's --trace-url template, apart from the router: the CLI checks it at every start. */
import { KreplayError } from '../../core/errors';

export const TRACE_ID_FIELD = '{trace_id}';

/** A --trace-url template: an http(s) URL holding {trace_id}. Throws E_INVALID_VALUE naming what is wrong. */
export function checkTraceUrl(template: string): string {
  const bad = (why: string) => new KreplayError('E_INVALID_VALUE', `--trace-url "${template}" ${why}`);
  if (!template.includes(TRACE_ID_FIELD)) throw bad(`must hold ${TRACE_ID_FIELD}`);
  let url: URL;
  try {
    url = new URL(template.replaceAll(TRACE_ID_FIELD, '0'));
  } catch {
    throw bad('is not a URL');
  }
  if (url.protocol !== 'http:' && url.protocol !== 'https:') throw bad('must be an http:// or https:// URL');
  return template;
}
