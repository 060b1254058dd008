/** Server-Sent Events framing. Data is one line of JSON: JSON never holds a raw newline. */
import type { LateFrame } from '../lane/replay-frame';

export function sseFrame(event: string, data: string, id?: number): string {
  return `${id === undefined ? '' : `id: ${id}\n`}event: ${event}\ndata: ${data}\n\n`;
}

/** A comment line: keeps proxies from cutting an idle stream, ignored by clients. */
export const SSE_HEARTBEAT = ': keepalive\n\n';

/** The frame's text with its lateness in ns (null: not known, as for history read back from the store). */
export function lateFrameText(frame: LateFrame, lateNs: bigint | null): string {
  return `${frame.head}${lateNs === null ? 'null' : lateNs}${frame.tail}`;
}
