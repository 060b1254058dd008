/**
 * Parsers for the values of query parameters (and the CLI flags that mirror
 * them). Times and durations become exact bigint nanoseconds straight from
 * their digits: a JS number cannot hold a 19-digit epoch-ns value.
 */
import { REDACT_KINDS, type RedactKind } from '../../core/incident/incident-types';
import { KreplayError } from '../../core/errors';
import { EVENT_TYPES, TARGET_KINDS, type EventType, type TargetKind } from '../../core/model';
import type { TargetPattern } from '../store/event-filter';

/** A value a client sent that does not parse; the message says what was expected. */
export class InvalidValue extends KreplayError {
  constructor(message: string) {
    super('E_INVALID_VALUE', message);
  }
}

export const INT64_MAX = (1n << 63n) - 1n;
const NS_PER_SECOND = 1_000_000_000n;
const NS_PER_MS = 1_000_000n;

// The separator before a "+hh:mm" offset may be a space: an unencoded "+" in a query string decodes to one.
const RFC3339 =
  /^(\d{4})-(\d{2})-(\d{2})[Tt](\d{2}):(\d{2}):(\d{2})(?:\.(\d+))?(?:([Zz])|([+ -])(\d{2}):(\d{2}))$/;
const TIME_EXPECTED = 'expected epoch nanoseconds or an RFC 3339 time such as 2026-11-22T09:30:00.123456789Z';

function daysInMonth(year: number, month: number): number {
  if (month === 2) return year % 4 === 0 && (year % 100 !== 0 || year % 400 === 0) ? 29 : 28;
  return [4, 6, 9, 11].includes(month) ? 30 : 31;
}

/* Days since 1970-01-01 of a proleptic Gregorian date (H. Hinnant's days_from_civil). */
function daysFromCivil(year: number, month: number, day: number): number {
  const y = month <= 2 ? year - 1 : year;
  const era = Math.floor(y / 400);
  const yearOfEra = y - era * 400;
  const dayOfYear = Math.floor((153 * (month + (month > 2 ? -3 : 9)) + 2) / 5) + day - 1;
  const dayOfEra = yearOfEra * 365 + Math.floor(yearOfEra / 4) - Math.floor(yearOfEra / 100) + dayOfYear;
  return era * 146097 + dayOfEra - 719468;
}

function checkRange(ns: bigint): bigint {
  if (ns < 0n || ns > INT64_MAX) throw new InvalidValue('out of range: must be from 1970 to 2262-04-11');
  return ns;
}

/** Epoch nanoseconds, or RFC 3339 with up to 9 fractional digits and any offset. */
export function parseTimeNs(text: string): bigint {
  if (/^\d+$/.test(text)) {
    if (text.length > 19) throw new InvalidValue('out of range: must be from 1970 to 2262-04-11');
    return checkRange(BigInt(text));
  }
  const m = RFC3339.exec(text);
  if (!m) throw new InvalidValue(TIME_EXPECTED);
  const [year, month, day, hour, minute, second] = m.slice(1, 7).map(Number) as [
    number,
    number,
    number,
    number,
    number,
    number,
  ];
  const fraction = m[7] ?? '';
  if (fraction.length > 9) throw new InvalidValue('at most 9 fractional digits (nanoseconds)');
  const offsetHours = Number(m[10] ?? 0);
  const offsetMinutes = Number(m[11] ?? 0);
  if (
    month < 1 ||
    month > 12 ||
    day < 1 ||
    day > daysInMonth(year, month) ||
    hour > 23 ||
    minute > 59 ||
    second > 59 ||
    offsetHours > 23 ||
    offsetMinutes > 59
  ) {
    throw new InvalidValue(`not a valid date and time: ${TIME_EXPECTED}`);
  }
  const offsetSign = m[9] === '-' ? -1 : 1;
  const seconds =
    daysFromCivil(year, month, day) * 86400 +
    hour * 3600 +
    minute * 60 +
    second -
    offsetSign * (offsetHours * 3600 + offsetMinutes * 60);
  return checkRange(BigInt(seconds) * NS_PER_SECOND + BigInt(fraction.padEnd(9, '0')));
}

/** RFC 3339 in UTC with all 9 fractional digits: the inverse of parseTimeNs. */
export function formatTimeNs(ns: bigint): string {
  const seconds = ns / NS_PER_SECOND;
  const fraction = (ns % NS_PER_SECOND).toString().padStart(9, '0');
  return `${new Date(Number(seconds) * 1000).toISOString().slice(0, 19)}.${fraction}Z`;
}

/** Decimal milliseconds (0.25 = 250000 ns), exact to the nanosecond. */
export function parseDurationMsNs(text: string): bigint {
  const m = /^(\d+)(?:\.(\d+))?$/.exec(text);
  if (!m) throw new InvalidValue('expected decimal milliseconds >= 0, such as 0.25');
  const fraction = m[2] ?? '';
  if (fraction.length > 6) throw new InvalidValue('at most 6 fractional digits (nanoseconds)');
  const ns = BigInt(m[1]!) * NS_PER_MS + BigInt(fraction.padEnd(6, '0'));
  if (ns > INT64_MAX) throw new InvalidValue('out of range');
  return ns;
}

/** One of `choices` or a comma-separated list of them, without repeats. */
function parseChoiceList<const T extends string>(choices: readonly T[]): (text: string) => T[] {
  const expected = `expected ${choices.slice(0, -1).join(', ')} or ${choices.at(-1)}, or a comma-separated list of them`;
  return (text) => {
    const picked = new Set<T>();
    for (const item of text.split(',')) {
      if (!(choices as readonly string[]).includes(item)) throw new InvalidValue(expected);
      picked.add(item as T);
    }
    return [...picked];
  };
}

export const parseEventTypes: (text: string) => EventType[] = parseChoiceList(EVENT_TYPES);
export const parseTargetKinds: (text: string) => TargetKind[] = parseChoiceList(TARGET_KINDS);
export const parseRedactKinds: (text: string) => RedactKind[] = parseChoiceList(REDACT_KINDS);

/** Longer than any target the kernel side reports (a path of at most 1280 bytes and a suffix). */
const MAX_TARGET_LENGTH = 4096;

/** A target matched exactly, or a prefix when it ends with "*" ("/var/lib/app/*", "tcp 10.0.0.5:*"). */
export function parseTargetPattern(text: string): TargetPattern {
  if (text.length === 0) throw new InvalidValue('must not be empty');
  if (text.length > MAX_TARGET_LENGTH) throw new InvalidValue(`at most ${MAX_TARGET_LENGTH} characters`);
  return text.endsWith('*') ? { value: text.slice(0, -1), prefix: true } : { value: text, prefix: false };
}

/** A whole number in min..max, from digits only. */
export function parseIntegerIn(min: number, max: number): (text: string) => number {
  return (text) => {
    if (!/^\d+$/.test(text)) throw new InvalidValue(`expected an integer ${min}..${max}`);
    const n = Number(text);
    if (n < min || n > max) throw new InvalidValue(`expected an integer ${min}..${max}`);
    return n;
  };
}

/** Non-empty text of bounded length (names and ids are matched exactly). */
export function parseText(text: string): string {
  if (text.length === 0) throw new InvalidValue('must not be empty');
  if (text.length > 256) throw new InvalidValue('at most 256 characters');
  return text;
}

export function parseChoice<const T extends string>(choices: readonly T[]): (text: string) => T {
  return (text) => {
    if (!(choices as readonly string[]).includes(text))
      throw new InvalidValue(`expected ${choices.map((c) => `"${c}"`).join(' or ')}`);
    return text as T;
  };
}
