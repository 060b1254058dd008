/** clickhouse:// URLs of --ship and --store: what they accept, and a clear error for the rest. */
import { ClickHouseHttp, parseClickHouseUrl } from '../../core/clickhouse/http-client';
import { eventsTable } from '../../core/clickhouse/schema';

describe('parseClickHouseUrl', () => {
  it('takes host, HTTP port and database, and optionally a cluster and a timeout', () => {
    expect(parseClickHouseUrl('clickhouse://ch-1:8123/kreplay')).toEqual({
      host: 'ch-1',
      port: 8123,
      database: 'kreplay',
    });
    const endpoint = parseClickHouseUrl('clickhouse://ch-1:8123/kreplay?cluster=fleet_2&timeout=2.5');
    expect(endpoint).toEqual({
      host: 'ch-1',
      port: 8123,
      database: 'kreplay',
      cluster: 'fleet_2',
      timeoutMs: 2500,
    });
    expect(eventsTable(endpoint)).toBe('events_on_fleet_2');
    expect(eventsTable({ ...endpoint, cluster: undefined })).toBe('events');
    expect(new ClickHouseHttp(endpoint).name).toBe('ch-1:8123');
  });

  it.each(['lz4', 'gzip', 'none'])('takes compression=%s for the shipper', (codec) => {
    expect(parseClickHouseUrl(`clickhouse://ch-1:8123/kreplay?compression=${codec}`)).toEqual({
      host: 'ch-1',
      port: 8123,
      database: 'kreplay',
      compression: codec,
    });
  });

  it.each([
    ['clickhouse://ch:8123/db?shard=1', /unknown setting "shard"/],
    ['clickhouse://ch:8123/db?cluster=a-b', /cluster must be a remote_servers name/],
    ["clickhouse://ch:8123/db?cluster=x'%20OR%201", /cluster must be/],
    ['clickhouse://ch:8123/db?timeout=0', /timeout must be a number of seconds/],
    ['clickhouse://ch:8123/db?timeout=soon', /timeout must be/],
    ['clickhouse://ch:8123/db?timeout=7200', /timeout must be/],
    ['clickhouse://ch:8123/db?compression=zstd', /compression must be lz4, gzip, none/],
    ['clickhouse://u:p@ch:8123/db', /not in the URL/],
    ['http://ch:8123/db', /expected clickhouse:\/\/HOST:PORT\/DB/],
  ])('refuses %s', (url, message) => {
    expect(() => parseClickHouseUrl(url)).toThrow(message);
  });
});
