/**
 * Turns the kernel's context ids into (transaction_id, trace_id). The kernel
 * gives every marker or HTTP head write a fresh id and hands us its bytes and
 * the id the thread had before (parent); we decide what the id means:
 *   valid marker      -> its fields, explicit
 *   clearing marker   -> no context
 *   malformed marker  -> whatever the parent meant (counted, logged once per reason)
 *   HTTP head         -> the parent while the parent is an explicit marker,
 *                        else its traceparent context, else the parent
 *   request head read -> the parent while the parent is an explicit marker,
 *                        else the request's context: none when the head is
 *                        incomplete (split across reads), carries neither a
 *                        valid traceparent nor an x-request-id, or is followed
 *                        by another request in the same read (pipelined), so a
 *                        thread never keeps serving the previous request's
 *                        context (all counted)
 *   runtime unit      -> the head a runtime's hook parsed, as a request
 *                        head read (it has no parent)
 */
import type { Logger } from '../../core/log/logger';
import {
  followedByAnotherRequest,
  headEnd,
  parseHttpHead,
  parseMarker,
  type TraceContext,
} from './context-parser';
import { ContextKind } from '../../core/model/record-layout';

export interface ResolvedContext extends TraceContext {
  explicit: boolean;
  /**
   * Left to the decoder: the store id it gave this resolution, valid while `storeOwner` is its
   * current token. A thread's later context records often resolve to the same one (a response head
   * keeps the request's): its id is then had without the dictionary's key and lookup (issue 46).
   */
  storeId: number;
  storeOwner: object | null;
}

export const NO_CONTEXT: ResolvedContext = Object.freeze({
  transactionId: null,
  traceId: null,
  explicit: false,
  storeId: 0,
  storeOwner: null,
});

/*
 * One shape for every resolution: a spread (`{ ...context, explicit }`) gave each its own hidden
 * class, a Map and descriptors of ~250 bytes held as long as the context (issue 46).
 */
function resolvedContext(context: TraceContext, explicit: boolean): ResolvedContext {
  return {
    transactionId: context.transactionId,
    traceId: context.traceId,
    parentSpanId: context.parentSpanId,
    traceFlags: context.traceFlags,
    explicit,
    storeId: 0,
    storeOwner: null,
  };
}

/*
 * Contexts remembered: enough for any realistic number of live ones, the oldest going first. The
 * kernel numbers contexts from one counter (bpf/capture/heads.h), so a table indexed by the id's low
 * bits keeps the last CONTEXT_SLOTS ids; a Map of them cost a hash insert and rehashes per record.
 */
const CONTEXT_SLOTS = 2 ** 20;
/* The resolutions are held in pages made at first use: an agent that sees few contexts holds little. */
const PAGE_BITS = 12;
const PAGE_MASK = (1 << PAGE_BITS) - 1;

export class ContextResolver {
  /* the id each slot holds (0: none; zero pages until used) and its resolution, by slot */
  private readonly ids = new Float64Array(CONTEXT_SLOTS);
  private readonly pages: ResolvedContext[][] = [];
  private readonly loggedReasons = new Set<string>();
  malformedMarkers = 0;
  incompleteRequestHeads = 0;
  untracedRequestHeads = 0;
  pipelinedRequestHeads = 0;
  unknownIds = 0;

  constructor(private readonly log: Logger) {}

  /** A kernel context record: its bytes (a view of the record's, not kept). */
  define(id: number, parentId: number, kind: number, data: Buffer): ResolvedContext {
    const parent = this.lookup(parentId);
    let resolved: ResolvedContext;
    if (kind === ContextKind.Marker) {
      const parsed = parseMarker(data.toString('latin1'));
      if (parsed.kind === 'set') resolved = resolvedContext(parsed.context, true);
      else if (parsed.kind === 'clear') resolved = NO_CONTEXT;
      else {
        this.malformedMarkers++;
        if (!this.loggedReasons.has(parsed.reason)) {
          this.loggedReasons.add(parsed.reason);
          this.log.warn('ignored a malformed KREPLAY-CTX marker (logged once per reason)', {
            reason: parsed.reason,
          });
        }
        resolved = parent;
      }
    } else if (kind === ContextKind.HttpRequest || kind === ContextKind.Runtime) {
      resolved = parent.explicit ? parent : this.requestContext(data);
    } else {
      const http = parent.explicit ? null : parseHttpHead(data);
      resolved = http ? resolvedContext(http, false) : parent;
    }
    const slot = id % CONTEXT_SLOTS;
    const page = (this.pages[slot >>> PAGE_BITS] ??= new Array<ResolvedContext>(PAGE_MASK + 1).fill(
      NO_CONTEXT,
    ));
    page[slot & PAGE_MASK] = resolved;
    this.ids[slot] = id;
    return resolved;
  }

  private requestContext(data: Buffer): ResolvedContext {
    const end = headEnd(data);
    if (end === -1) {
      this.incompleteRequestHeads++;
      return NO_CONTEXT;
    }
    if (followedByAnotherRequest(data, end)) {
      this.pipelinedRequestHeads++;
      return NO_CONTEXT;
    }
    const http = parseHttpHead(data, end);
    if (!http) {
      this.untracedRequestHeads++;
      return NO_CONTEXT;
    }
    return resolvedContext(http, false);
  }

  lookup(id: number): ResolvedContext {
    if (id === 0) return NO_CONTEXT;
    const slot = id % CONTEXT_SLOTS;
    if (this.ids[slot] === id) return this.pages[slot >>> PAGE_BITS]![slot & PAGE_MASK]!;
    this.unknownIds++;
    return NO_CONTEXT;
  }
}
