/**
 * docs/reference/config.md: every key of the agent's --config file, from its schema's own
 * descriptions (agent/config/config-schema.ts), as the file's JSON Schema gives them.
 */
import { z } from 'zod';
import { agentConfigSchema } from '../agent/config/config-schema';
import { cell, HEADER } from './reference-format';

interface JsonSchema {
  type?: string | string[];
  description?: string;
  default?: unknown;
  enum?: unknown[];
  pattern?: string;
  properties?: Record<string, JsonSchema>;
  items?: JsonSchema;
  required?: string[];
}

/** A key's row: path (`services[].match.unit`), type, default, description. */
export interface ConfigKey {
  path: string;
  type: string;
  required: boolean;
  default: unknown;
  description: string | undefined;
}

function typeOf(schema: JsonSchema): string {
  if (Array.isArray(schema.enum)) return schema.enum.map((v) => `\`${String(v)}\``).join(' or ');
  const types = Array.isArray(schema.type) ? schema.type : [schema.type ?? 'any'];
  if (types.includes('array') && schema.items) return `list of ${typeOf(schema.items)}`;
  if (types.includes('object') && !schema.properties) return 'map of string';
  return types.join(' or ');
}

/** Every key of the config file, parents before their children. */
export function configKeys(): ConfigKey[] {
  const root = z.toJSONSchema(agentConfigSchema, { io: 'input', unrepresentable: 'any' }) as JsonSchema;
  const keys: ConfigKey[] = [];
  const visit = (schema: JsonSchema, prefix: string): void => {
    for (const [name, property] of Object.entries(schema.properties ?? {})) {
      const path = `${prefix}${name}`;
      keys.push({
        path,
        type: typeOf(property),
        required: schema.required?.includes(name) ?? false,
        default: property.default,
        description: property.description,
      });
      visit(property, `${path}.`);
      if (property.items) visit(property.items, `${path}[].`);
    }
  };
  visit(root, '');
  return keys;
}

export function configPage(): string {
  const rows = configKeys().map(
    (key) =>
      `| \`${key.path}\` | ${cell(key.type)} | ${key.required ? 'required' : key.default === undefined ? '' : cell(`\`${JSON.stringify(key.default)}\``)} | ${cell(key.description ?? '')} |`,
  );
  return [
    `${HEADER("the agent's config schema (agent/config/config-schema.ts)")}# Config file reference`,
    '',
    '`kreplay agent --config FILE` (and `kreplay up --config FILE`) reads one YAML (`.yaml`, `.yml`) or JSON (`.json`) file with these keys; any other key stops the agent naming it. [Operate](../operate.md#the---config-file) has an example.',
    '',
    '| key | type | default | what |',
    '| --- | --- | --- | --- |',
    ...rows,
    '',
  ].join('\n');
}
