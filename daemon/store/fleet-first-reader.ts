/**
 * A daemon reading the fleet store (`--store clickhouse://…`) also serves
 * the incident files dropped into its data dir: ClickHouse answers each read
 * first, and where it has nothing (for the filter, from the read's
 * position on), the incident stores answer. So a ticket's incident that the
 * fleet no longer holds (retention pruned it) or never held (another fleet)
 * is searchable and replayable by its transaction, and one the fleet holds
 * is served from the fleet and never shown twice.
 */
import type { EventReader } from './event-reader';

export function fleetFirstReader(fleet: EventReader, incidents: EventReader): EventReader {
  return {
    page: async (filter, opts) => {
      const page = await fleet.page(filter, opts);
      return page.events.length > 0 ? page : incidents.page(filter, opts);
    },
    summarize: async (filter) => {
      const summary = await fleet.summarize(filter);
      return summary.count > 0 ? summary : incidents.summarize(filter);
    },
    get: async (eventId) => (await fleet.get(eventId)) ?? incidents.get(eventId),
    nodes: async () => [...new Set([...(await fleet.nodes()), ...(await incidents.nodes())])].sort(),
    retainedFrom: (filter) => fleet.retainedFrom(filter),
    sampledRanges: async (filter) => [
      ...(await fleet.sampledRanges(filter)),
      ...(await incidents.sampledRanges(filter)),
    ],
  };
}
