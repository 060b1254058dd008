/**
 * How `--help` shows defaults: in the units a user types them in (6h, 10%,
 * 600 s, 64 MiB, none), never as raw nanoseconds, JSON objects or bigints
 * (which JSON cannot even write). One owner for every command: buildProgram
 * runs it over the whole tree; an option that set its own text keeps it.
 */
import type { Command, Option } from 'commander';

const DURATION_UNITS: [string, number][] = [
  ['d', 86_400e9],
  ['h', 3_600e9],
  ['m', 60e9],
  ['s', 1e9],
  ['ms', 1e6],
  ['us', 1e3],
];

/** 21600000000000 → "6h"; the largest unit that divides it, else ns. */
export function durationText(ns: number): string {
  if (ns === 0) return '0';
  const unit = DURATION_UNITS.find(([, size]) => ns % size === 0);
  return unit ? `${ns / unit[1]}${unit[0]}` : `${ns} ns`;
}

/** The default of `option` as it reads in help, or null to leave commander's. */
function humanDefault(option: Option): string | null {
  const value: unknown = option.defaultValue;
  const placeholder = /<([^>]+)>/.exec(option.flags)?.[1] ?? '';
  if (value === undefined || option.defaultValueDescription !== undefined) return null;
  if (Array.isArray(value)) return value.length === 0 ? 'none' : value.join(', ');
  if (typeof value === 'bigint') return `${value}`;
  if (typeof value === 'object' && value !== null) {
    if ('share' in value) return `${Number(value.share) * 100}%`;
    if ('bytes' in value) return `${Number(value.bytes)} bytes`;
    return null;
  }
  if (typeof value !== 'number') return null;
  if (placeholder === 'duration') return durationText(value);
  if (placeholder === 'ns') return value === 0 ? '0 ns' : durationText(value);
  if (placeholder === 'seconds' || placeholder === 's') return `${value} s`;
  if (placeholder === 'mb') return `${value} MiB`;
  return null;
}

export function humanizeDefaults(command: Command): void {
  for (const option of command.options) {
    const text = humanDefault(option);
    if (text !== null) option.default(option.defaultValue, text);
  }
  for (const sub of command.commands) humanizeDefaults(sub);
}
