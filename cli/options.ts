/** Flag value parsers: each names the flag and what it expected. */
import { InvalidArgumentError } from 'commander';

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
