/** Flag value parsers: each names the flag and what it expected. */
import { InvalidArgumentError } from 'commander';
import { InvalidValue } from '../daemon/http/query-values';

export function integerOption(min: number, max: number) {
  return (value: string): number => {
    if (!/^-?\d+$/.test(value)) throw new InvalidArgumentError(`expected an integer, got "${value}"`);
    const n = Number(value);
    if (n < min || n > max) throw new InvalidArgumentError(`expected ${min}..${max}, got ${value}`);
    return n;
  };
}

export function decimalOption(min: number, max: number) {
  return (value: string): number => {
    if (!/^\d+(\.\d+)?$/.test(value))
      throw new InvalidArgumentError(`expected a decimal number, got "${value}"`);
    const n = Number(value);
    if (n < min || n > max) throw new InvalidArgumentError(`expected ${min}..${max}, got ${value}`);
    return n;
  };
}

/** Repeatable flag: --pid 1 --pid 2 */
export function collectIntegers(min: number, max: number) {
  const parse = integerOption(min, max);
  return (value: string, previous: number[] = []): number[] => [...previous, parse(value)];
}

/** A flag checked by the daemon's own parser for the query parameter it becomes, passed on as typed. */
export function queryValueOption(parse: (text: string) => unknown) {
  return (value: string): string => {
    try {
      parse(value);
    } catch (err) {
      if (err instanceof InvalidValue) throw new InvalidArgumentError(err.message);
      throw err;
    }
    return value;
  };
}

/** An http(s) base URL, without a trailing slash. */
export function baseUrlOption(value: string): string {
  let url: URL | null = null;
  try {
    url = new URL(value);
  } catch {
    // reported below
  }
  if (!url || (url.protocol !== 'http:' && url.protocol !== 'https:'))
    throw new InvalidArgumentError(`expected an http:// or https:// URL, got "${value}"`);
  return value.replace(/\/+$/, '');
}
