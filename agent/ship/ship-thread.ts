/**
 * The shipper's thread: the ship loop (agent/ship/ship-loop.ts) with its own
 * ClickHouse client, so encoding, compressing and sending a batch never
 * take the agent's main thread, which decodes the capture. The main thread
 * only learns the progress (one message a batch, retry and stop).
 */
import { parentPort, workerData } from 'node:worker_threads';
import { ClickHouseHttp } from '../../core/clickhouse/http-client';
import { ShipLoop, type ShipProgress } from './ship-loop';
import type { ShipThreadData, ToShipThread } from './ship-protocol';

const data = workerData as ShipThreadData;
const port = parentPort!;
const loop = new ShipLoop(
  data.storePath,
  new ClickHouseHttp(data.endpoint, data.timeoutMs),
  data.destination,
  data.progress,
  (progress: ShipProgress) => port.postMessage({ ...progress }),
  data.options,
);
port.on('message', (message: ToShipThread) => {
  // after the last progress message: the owner's stop() resolves on it, then the thread ends
  void loop.stop(message.flushMs).then(() => port.close());
});
loop.start();
