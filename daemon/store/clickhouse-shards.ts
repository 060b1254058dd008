/**
 * Which shard of a cluster failed a query. The entry server's error names the
 * address it could not reach (refused, timed out); a query we stopped waiting
 * for names nothing, so each shard is then asked for one row through the
 * entry, briefly, and those that do not answer are named. The 503 the daemon
 * answers with then says which shard to look at.
 */
import { ClickHouseError, ClickHouseHttp } from '../../core/clickhouse/http-client';
import { quoteString } from '../../core/clickhouse/quote';

/** How long a probe of one shard may take: a shard that answers does so in milliseconds. */
const PROBE_TIMEOUT_MS = 2000;

interface Shard {
  shard_num: number;
  host_name: string;
  port: number;
}

function shardName(cluster: string, s: Shard): string {
  return `shard ${s.shard_num} of cluster ${cluster} (${s.host_name}:${s.port})`;
}

/** `err` (from a query over the cluster) restated to name the shards that failed, when they can be told. */
export async function explainShardFailure(
  ch: ClickHouseHttp,
  err: ClickHouseError,
): Promise<ClickHouseError> {
  const cluster = ch.endpoint.cluster;
  if (!cluster) return err;
  const probe = new ClickHouseHttp(
    ch.endpoint,
    Math.min(PROBE_TIMEOUT_MS, ch.endpoint.timeoutMs ?? PROBE_TIMEOUT_MS),
  );
  let shards: Shard[];
  try {
    shards = await probe.rows<Shard>(
      `SELECT shard_num, host_name, port FROM system.clusters WHERE cluster = ${quoteString(cluster)} ORDER BY shard_num`,
    );
  } catch {
    return err; // the entry server itself: its own message names it
  }
  if (shards.length === 0)
    return new ClickHouseError(
      'E_CLICKHOUSE_REFUSED',
      `ClickHouse at ${ch.name} has no cluster ${cluster} in its remote_servers: ${err.message}`,
    );
  let failed = shards.filter((s) => err.message.includes(`${s.host_name}:${s.port})`));
  if (failed.length === 0) {
    const answers = await Promise.all(
      shards.map((s) =>
        probe.rows(`SELECT 1 FROM remote(${quoteString(`${s.host_name}:${s.port}`)}, system.one)`).then(
          () => true,
          () => false,
        ),
      ),
    );
    failed = shards.filter((_, i) => !answers[i]);
  }
  if (failed.length === 0) return err;
  return new ClickHouseError(
    'E_CLICKHOUSE_DOWN',
    `${failed.map((s) => shardName(cluster, s)).join(' and ')} did not answer ClickHouse at ${ch.name}: ${err.message.slice(0, 300)}`,
    { cause: err },
  );
}
