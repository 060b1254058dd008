import { KreplayError } from '../../core/errors';
import { readFileSync } from 'node:fs';
import { extname } from 'node:path';
import YAML from 'yaml';
import type { z } from 'zod';
import { agentConfigSchema, type AgentConfig } from './config-schema';

export class ConfigError extends KreplayError {
  constructor(message: string) {
    super('E_CONFIG', message);
  }
}

function describeIssues(error: z.ZodError): string {
  return error.issues.map((i) => `${i.path.length ? i.path.join('.') : '(root)'}: ${i.message}`).join('; ');
}

export function parseConfig(text: string, source: string, format: 'json' | 'yaml'): AgentConfig {
  let raw: unknown;
  try {
    raw = format === 'json' ? JSON.parse(text) : YAML.parse(text);
  } catch (err) {
    throw new ConfigError(
      `config file ${source} is not valid ${format.toUpperCase()}: ${(err as Error).message}`,
    );
  }
  const parsed = agentConfigSchema.safeParse(raw ?? {});
  if (!parsed.success) throw new ConfigError(`config file ${source}: ${describeIssues(parsed.error)}`);
  return parsed.data;
}

export function loadConfig(path: string | undefined): AgentConfig {
  if (!path) return agentConfigSchema.parse({});
  let text: string;
  try {
    text = readFileSync(path, 'utf8');
  } catch (err) {
    throw new ConfigError(`cannot read config file ${path}: ${(err as Error).message}`);
  }
  const ext = extname(path).toLowerCase();
  if (ext !== '.json' && ext !== '.yaml' && ext !== '.yml') {
    throw new ConfigError(`config file ${path}: use a .json, .yaml or .yml file`);
  }
  return parseConfig(text, path, ext === '.json' ? 'json' : 'yaml');
}
