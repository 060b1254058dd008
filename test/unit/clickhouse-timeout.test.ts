/**
 * ClickHouseHttp's request deadline: a timeout given in fractional milliseconds (a deadline left on
 * performance.now()'s clock, as the ship loop's stop flush computes it) is a deadline like any other.
 */
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { ClickHouseHttp } from '../../core/clickhouse/http-client';

let server: Server;
let port: number;
let requests = 0;

beforeAll(async () => {
  server = createServer((req, res) => {
    requests++;
    req.resume();
    req.on('end', () => res.end('1\n'));
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  port = (server.address() as AddressInfo).port;
});

afterAll(async () => {
  server.closeAllConnections();
  await new Promise((resolve) => server.close(resolve));
});

describe('ClickHouseHttp.exec timeouts', () => {
  it('sends and answers under a fractional timeout', async () => {
    const client = new ClickHouseHttp({ host: '127.0.0.1', port, database: 'kreplay' });
    const before = requests;
    await expect(client.exec('SELECT 1', undefined, null, 2999.172366999999)).resolves.toBe('1\n');
    await expect(client.exec('INSERT INTO t FORMAT TSV', '1\n', null, 1000.5)).resolves.toBe('1\n');
    expect(requests - before).toBe(2);
  });

  it('names a deadline already past as ClickHouse not answering in time, not a RangeError', async () => {
    const client = new ClickHouseHttp({ host: '127.0.0.1', port, database: 'kreplay' });
    const before = requests;
    for (const past of [-12.5, 0]) {
      await expect(client.exec('SELECT 1', undefined, null, past)).rejects.toMatchObject({
        code: 'E_CLICKHOUSE_DOWN',
        message: expect.stringMatching(/no answer in 0 ms/),
      });
    }
    // nothing sent: whether a loopback answer beat a 0 ms timer was a race (it did, once in a full run)
    expect(requests - before).toBe(0);
  });
});
