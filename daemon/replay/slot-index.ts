/** Names to their index: what the shared-memory layouts (clock wire, lane) are written in. */
export function indexOf<const N extends string>(names: readonly N[]): Record<N, number> {
  return Object.fromEntries(names.map((name, i) => [name, i])) as Record<N, number>;
}
