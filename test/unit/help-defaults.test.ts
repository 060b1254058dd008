import type { Command } from 'commander';
import { durationText } from '../../cli/help-defaults';
import { buildProgram } from '../../cli/main';

/** Every command and subcommand of the CLI, by its full name. */
function commands(command: Command, prefix: string[] = []): [string, Command][] {
  return command.commands.flatMap((sub) => {
    const name = [...prefix, sub.name()];
    return [[name.join(' '), sub] as [string, Command], ...commands(sub, name)];
  });
}

const all = commands(buildProgram());

describe('--help of every command', () => {
  it('covers the commands', () => {
    expect(all.map(([name]) => name)).toEqual(
      expect.arrayContaining(['agent', 'daemon', 'replay', 'up', 'export']),
    );
  });

  it.each(all)('kreplay %s --help renders, every default in human units', (_name, command) => {
    // helpInformation is what --help prints: a default JSON cannot write (a bigint) would throw here
    const help = command.helpInformation().replace(/\n\s+/g, ' ');
    for (const [, text] of help.matchAll(/\(default: ([^)]*)\)/g)) {
      // no JSON objects or lists, no raw counts of nanoseconds or bytes
      expect(text).not.toMatch(/^[[{]/);
      expect(text).not.toMatch(/^\d{7,}$/);
    }
    // a time or size in seconds, nanoseconds or MiB says its unit
    for (const option of command.options) {
      const placeholder = /<(seconds|s|ns|mb|duration)>/.exec(option.flags);
      if (!placeholder || option.defaultValue === undefined) continue;
      expect(option.defaultValueDescription).toMatch(/^\d+(\.\d+)?( ?(s|ns|MiB|ms|us|m|h|d))?$/);
    }
  });

  it('shows durations with the largest unit that divides them', () => {
    expect(durationText(6 * 3600e9)).toBe('6h');
    expect(durationText(7 * 86400e9)).toBe('7d');
    expect(durationText(90e9)).toBe('90s');
    expect(durationText(1500)).toBe('1500 ns');
  });
});
