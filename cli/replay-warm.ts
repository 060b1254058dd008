/**
 * A dense replay's first events must not meet cold code on their way out of
 * `kreplay replay` (cli/session-replay.ts): before it asks for the play, the
 * CLI reads a made-up event stream through the path the real one takes, an
 * answer read by ResponseStream (its head, then its reads in one buffer
 * reused, as cli/replay-stream.ts's socket hands them over) and listened to
 * into `ReplayLines`, and throws the lines away. No socket, nothing listens.
 * Frames as the daemon writes them
 * (daemon/replay/lane/replay-frame.ts: an id of six digits, an event's JSON
 * of a few hundred bytes, the replay's fields last) in reads cut inside a
 * frame, as a socket's are. The warm-up it replaces (frames of a few bytes
 * pushed straight into the parser, each ending at a frame's end) gave the
 * parser neither the buffers node:http hands over (another hidden class)
 * nor a frame split across reads: the first real read deoptimized it, and it
 * was compiled again during the play (bench/RESULTS.md, issue 48, dense48l).
 * Long enough that the parser's loop is compiled by V8's optimizing tier
 * before the play, and then the warm-up's garbage is collected: with three
 * rounds a dense play's first 30-60 ms met both, its `frame` compiled by
 * TurboFan at its 7,400th event and a scavenge of 4-7 ms at its start in
 * every play, on a host whose two cores the play already fills
 * (bench/RESULTS.md, issue 48, thirty-first session).
 */
import { ReplayLines } from './replay-lines';
import { READ_BYTES } from './replay-stream';
import { ResponseStream } from './response-stream';

/** An event's JSON as the daemon streams it, replay fields last, of a recorded event's length. */
function eventJson(i: number): string {
  const id = (0x4d6c27c3 + i).toString(16).padStart(40, '0');
  return (
    `{"event_id":"${id}","event_type":"sys_write","timestamp_ns":${1_795_000_000_000_000_000 + i * 10_000},` +
    `"duration_ns":1000,"service_name":"svc","transaction_id":"warm","trace_id":null,"node":"n1","pid":1,` +
    `"tid":1,"comm":"worker","bytes":64,"syscall":"write","fd":3,"ret":64,"target_kind":null,"target":null,` +
    `"replay_offset_ns":${i * 10_000},"replayed_duration_ns":1000,"emitted_late_ns":${(i * 7919) % 100_000}}`
  );
}

const FRAMES = 384;
/** rounds of the stream read, each ending with a state */
export const WARM_ROUNDS = 40;
/** frames a read spans, in turn, up to a socket's 64 KiB */
const SPANS = [1, 3, 14, 35, 70];
/** where in a frame each read ends, in turn: in its id, its event line, its data, between its two newlines, at its start */
const ENDS = [2, 12, 200, -1, 0];
const STATE = 'event: state\ndata: {"state":"playing"}\n\n';
const HEAD = 'HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\nConnection: close\r\n\r\n';

const frame = (i: number) => `id: ${100_000 + i}\nevent: replay\ndata: ${eventJson(i)}\n\n`;

/** FRAMES frames then a state, as the daemon writes them, cut into reads that end where a socket's do, WARM_ROUNDS times over. */
export function warmReads(): Buffer[] {
  const frames = Array.from({ length: FRAMES }, (_, i) => frame(i));
  const stream = Buffer.from(frames.join('') + STATE);
  // where each frame starts (ASCII: a character a byte), and the state after the last
  const starts = [0];
  for (const text of frames) starts.push(starts.at(-1)! + text.length);
  const cuts: number[] = [];
  for (let f = 0, k = 0; (f += SPANS[k % SPANS.length]!) < FRAMES; k++) {
    const end = ENDS[k % ENDS.length]!;
    cuts.push(end < 0 ? starts[f + 1]! + end : starts[f]! + end);
  }
  cuts.push(stream.length);
  const reads: Buffer[] = [];
  for (let round = 0; round < WARM_ROUNDS; round++) {
    let from = 0;
    for (const cut of cuts) {
      reads.push(stream.subarray(from, cut));
      from = cut;
    }
  }
  return reads;
}

/**
 * Reads the warm-up's reads as an event stream's answer through the stream's
 * reader (ResponseStream: its head, then each read, in a buffer reused as a
 * socket's is) into a parser of its own; resolves when the answer ends.
 * 40-60 ms of CPU, once, before the play is asked for: no event waits for it.
 * Then `collect`: the collector, where the launcher exposes it (bin/kreplay:
 * `--expose-gc`), so that the play starts with an empty young generation.
 */
export async function warmReplayPath(collect: (() => void) | undefined): Promise<void> {
  const parser = new ReplayLines();
  // nothing to hold or close: the reads are all here
  const stream = new ResponseStream({ resume: () => undefined, destroy: () => undefined });
  const buffer = Buffer.allocUnsafe(READ_BYTES);
  const read = (bytes: Buffer) => stream.read(buffer.subarray(0, bytes.copy(buffer)));
  read(Buffer.from(HEAD));
  const listening = (await stream.opened).listen((chunk) => {
    parser.push(chunk);
  });
  for (const bytes of warmReads()) read(bytes);
  stream.end();
  await listening;
  collect?.();
}
