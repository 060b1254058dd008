/** Server-Sent Events framing. Data is one line of JSON: JSON never holds a raw newline. */
import type { LateFrame } from '../replay-clock';

export function sseFrame(event: string, data: string, id?: number): string {
  return `${id === undefined ? '' : `id: ${id}\n`}event: ${event}\ndata: ${data}\n\n`;
}

/** A comment line: keeps proxies from cutting an idle stream, ignored by clients. */
export const SSE_HEARTBEAT = ': keepalive\n\n';

/** How a replay frame ends while its lateness, the data's last field, is unknown. */
const LATE_PLACEHOLDER = 'null}\n\n';

/** Splits a replay frame written with `"emitted_late_ns":null` last, at that null. */
export function splitLateFrame(index: number, text: string): LateFrame {
  if (!text.endsWith(LATE_PLACEHOLDER))
    throw new Error(
      `replay frame ${index} does not end with its lateness: ${JSON.stringify(text.slice(-40))}`,
    );
  return { index, head: text.slice(0, -LATE_PLACEHOLDER.length), tail: LATE_PLACEHOLDER.slice(4) };
}

/** The frame's text with its lateness in ns (null: not known, as for history read back from the store). */
export function lateFrameText(frame: LateFrame, lateNs: bigint | null): string {
  return `${frame.head}${lateNs === null ? 'null' : lateNs}${frame.tail}`;
}
