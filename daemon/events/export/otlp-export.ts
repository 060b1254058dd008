/**
 * Events -> one OTLP/JSON ExportTraceServiceRequest (what a trace viewer or
 * an OTLP file receiver opens), written a page at a time: each page's spans
 * are one ResourceSpans list made by the OpenTelemetry project's JSON
 * serializer, and the document joins the lists (ResourceSpans is a repeated
 * field; several may name the same resource). Events without a W3C trace id
 * (a KREPLAY-CTX marker's free-form trace, or none) have no trace to go into
 * and are left out; the response says how many events matched
 * (X-Kreplay-Events) so the CLI can say how many were left out.
 */
import type { ApiEvent } from '../../../core/model';
import { eventSpan, SpanResources, type KernelSpan } from '../../../core/otlp/event-span';
import { encodeSpansJson } from '../../../core/otlp/otlp-encoding';

const HEAD = '{"resourceSpans":[';
const TAIL = ']}\n';

export class OtlpJsonWriter {
  private readonly resources = new SpanResources();
  private first = true;
  spans = 0;

  begin(): string {
    return HEAD;
  }

  /** Text for a page of events. */
  add(events: readonly ApiEvent[]): string {
    const spans: KernelSpan[] = [];
    for (const event of events) {
      const span = eventSpan(event, this.resources);
      if (span) spans.push(span);
    }
    if (spans.length === 0) return '';
    this.spans += spans.length;
    const request = Buffer.from(encodeSpansJson(spans)).toString('utf8');
    // the serializer's {"resourceSpans":[…]} without its wrapper
    const list = request.slice(HEAD.length, request.lastIndexOf(']'));
    const text = this.first ? list : `,${list}`;
    this.first = false;
    return text;
  }

  end(): string {
    return TAIL;
  }
}
