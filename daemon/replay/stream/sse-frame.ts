/** Server-Sent Events framing. Data is one line of JSON: JSON never holds a raw newline. */

export function sseFrame(event: string, data: string, id?: number): string {
  return `${id === undefined ? '' : `id: ${id}\n`}event: ${event}\ndata: ${data}\n\n`;
}

/** A comment line: keeps proxies from cutting an idle stream, ignored by clients. */
export const SSE_HEARTBEAT = ': keepalive\n\n';
