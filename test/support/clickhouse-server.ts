/** ClickHouse servers and clusters for jest describe blocks (bench/clickhouse-servers.ts starts them). */
import { TestClickHouse, TestCluster } from '../../bench/clickhouse-servers';

export * from '../../bench/clickhouse-servers';

/** One server for a describe block: started before its tests, destroyed after them. */
export function useClickHouse(): { server: TestClickHouse } {
  const holder = {} as { server: TestClickHouse };
  beforeAll(async () => {
    holder.server = await TestClickHouse.create();
    await holder.server.start();
  });
  afterAll(async () => {
    await holder.server?.destroy();
  });
  return holder;
}

/** A cluster for a describe block: started before its tests, destroyed after them. */
export function useClickHouseCluster(): { cluster: TestCluster } {
  const holder = {} as { cluster: TestCluster };
  beforeAll(async () => {
    holder.cluster = await TestCluster.create();
  }, 60_000);
  afterAll(async () => {
    await holder.cluster?.destroy();
  });
  return holder;
}
