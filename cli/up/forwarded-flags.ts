/**
 * `kreplay up` takes the flags of the commands it runs, from their own definitions: an option
 * added to `kreplay agent` or `kreplay daemon` is an option of `up` without a line here. Each flag
 * given is forwarded as typed (commander has checked it already) to every child that defines it.
 */
import type { Command, Option } from 'commander';

export type Children<Name extends string> = Record<Name, Command>;

/**
 * Adds the children's options to `up` (an option both define, like --data-dir, once) and returns
 * the argv each child gets, filled in while commander parses.
 */
export function forwardChildFlags<Name extends string>(
  up: Command,
  children: Children<Name>,
): Record<Name, string[]> {
  const argv = {} as Record<Name, string[]>;
  const owners = new Map<string, { option: Option; names: Name[] }>();
  for (const name of Object.keys(children) as Name[]) {
    argv[name] = [];
    for (const option of children[name].options) {
      const key = option.name();
      const entry = owners.get(key) ?? { option, names: [] };
      entry.names.push(name);
      owners.set(key, entry);
    }
  }
  for (const [key, { option, names }] of owners) {
    up.addOption(option);
    const flag = option.long ?? option.short!;
    up.on(`option:${key}`, (value?: string | null) => {
      for (const name of names) argv[name].push(flag, ...(typeof value === 'string' ? [value] : []));
    });
  }
  return argv;
}
