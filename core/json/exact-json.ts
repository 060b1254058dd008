/**
 * JSON text with bigints written exactly (JSON.stringify cannot write a
 * bigint, and a JS number would round a 19-digit nanosecond count): as
 * integer literals, or as strings for JavaScript clients that would round them.
 */

export function int64Json(value: bigint, asString = false): string {
  return asString ? `"${value}"` : value.toString();
}

/** Any JSON-able value; undefined is written as null. */
export function exactJson(value: unknown, int64AsString = false): string {
  if (typeof value === 'bigint') return int64Json(value, int64AsString);
  if (Array.isArray(value)) return `[${value.map((v) => exactJson(v, int64AsString)).join(',')}]`;
  if (value !== null && typeof value === 'object') {
    const members = Object.entries(value).map(
      ([key, v]) => `${JSON.stringify(key)}:${exactJson(v, int64AsString)}`,
    );
    return `{${members.join(',')}}`;
  }
  return JSON.stringify(value ?? null);
}
