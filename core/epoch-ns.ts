/**
 * The wall clock in ns since the epoch, as events are stamped: for times stored beside them or
 * compared with their stamps. Waits and intervals use a monotonic clock (performance.now) instead,
 * which a step of the wall clock does not move (docs/operate.md, "The wall clock stepping").
 */
export function epochNs(): bigint {
  return BigInt(Date.now()) * 1_000_000n;
}
