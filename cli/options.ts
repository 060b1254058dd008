/** Flag value parsers: each names the flag and what it expected. */
import { InvalidArgumentError } from 'commander';
import { InvalidValue } from '../daemon/http/query-values';
import { KreplayError } from '../core/errors';

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

/** A flag value checked by its owner's parser (a KreplayError becomes commander's message); repeatable collects a list. */
export function parsedOption<T>(
  parse: (text: string) => T,
  repeatable: true,
): (value: string, previous?: T[]) => T[];
export function parsedOption<T>(parse: (text: string) => T, repeatable: false): (value: string) => T;
export function parsedOption<T>(parse: (text: string) => T, repeatable: boolean) {
  const one = (value: string): T => {
    try {
      return parse(value);
    } catch (err) {
      if (err instanceof KreplayError) throw new InvalidArgumentError(err.message);
      throw err;
    }
  };
  return repeatable ? (value: string, previous: T[] = []): T[] => [...previous, one(value)] : one;
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

const DURATION_UNITS_NS: Record<string, number> = { s: 1e9, m: 60e9, h: 3600e9, d: 86400e9 };

/** A duration such as 90s, 30m, 6h or 7d, in ns; 0 stands for "forever". */
export function durationOption(value: string): number {
  const match = /^(\d+)([smhd])$/.exec(value);
  if (value === '0') return 0;
  if (!match)
    throw new InvalidArgumentError(`expected a duration like 90s, 30m, 6h or 7d (or 0), got "${value}"`);
  return Number(match[1]) * DURATION_UNITS_NS[match[2]!]!;
}

const SIZE_UNITS: Record<string, number> = { '': 1, K: 1024, M: 1024 ** 2, G: 1024 ** 3, T: 1024 ** 4 };

/** A size in bytes (with K, M, G or T) or a share of a filesystem (1%..100%); 0 stands for "no cap". */
export function sizeOption(value: string): { bytes: number } | { share: number } {
  const percent = /^(\d+(?:\.\d+)?)%$/.exec(value);
  if (percent) {
    const share = Number(percent[1]) / 100;
    if (share <= 0 || share > 1) throw new InvalidArgumentError(`expected a share in 0%..100%, got ${value}`);
    return { share };
  }
  const match = /^(\d+)([KMGT]?)i?B?$/.exec(value);
  if (!match) throw new InvalidArgumentError(`expected bytes like 512M, 20G or 10%, got "${value}"`);
  return { bytes: Number(match[1]) * SIZE_UNITS[match[2]!]! };
}

/** HOST:PORT to listen on ([::1]:9464 for IPv6; port 0 picks one). */
export function listenAddressOption(value: string): { host: string; port: number } {
  const match = /^(?:\[([^\]]+)\]|([^:[\]]+)):(\d+)$/.exec(value);
  const port = Number(match?.[3]);
  if (!match || port > 65535)
    throw new InvalidArgumentError(`expected HOST:PORT such as 127.0.0.1:9464 or [::1]:9464, got "${value}"`);
  return { host: match[1] ?? match[2]!, port };
}
