/**
 * The reference pages under docs/reference/, generated and never written by
 * hand: the CLI from its commands' own --help, the HTTP API from the
 * OpenAPI document the daemon serves, the error codes and problem types from
 * their registries, the metrics from the agent's and the daemon's registries,
 * the config file's keys from its schema. `make docs` writes them; test/unit/docs-reference.test.ts
 * fails when one is stale.
 */
import type { Command } from 'commander';
import { buildProgram } from '../cli/main';
import { ERROR_CODES, RETIRED_ERROR_CODES } from '../core/error-codes';
import { PROBLEM_KINDS, PROBLEM_TYPE_BASE, problemCode, type ProblemKind } from '../core/problem-kinds';
import { openApiDocument } from '../daemon/openapi/openapi-document';
import { configPage } from './config-reference';
import { metricsPage } from './metrics-reference';
import { cell, HEADER } from './reference-format';

/** Columns the help text is wrapped at, whatever terminal generates it. */
const HELP_WIDTH = 100;

function cliPage(): string {
  const program = buildProgram();
  const sections: string[] = [];
  const visit = (command: Command, path: string[]): void => {
    command.configureHelp({ helpWidth: HELP_WIDTH });
    const name = ['kreplay', ...path].join(' ');
    sections.push(`## \`${name}\`\n\n\`\`\`text\n${command.helpInformation().trimEnd()}\n\`\`\`\n`);
    for (const sub of command.commands) if (sub.name() !== 'help') visit(sub, [...path, sub.name()]);
  };
  visit(program, []);
  return `${HEADER("the commands' own --help")}# CLI reference\n\n${sections.join('\n')}`;
}

type Json = Record<string, unknown>;

function typeOf(schema: Json | undefined): string {
  if (!schema) return '';
  if (Array.isArray(schema.enum)) return (schema.enum as unknown[]).map((v) => `\`${String(v)}\``).join(', ');
  if (typeof schema.$ref === 'string') return schema.$ref.replace('#/components/schemas/', '');
  if (Array.isArray(schema.anyOf)) return (schema.anyOf as Json[]).map(typeOf).join(' or ');
  return typeof schema.type === 'string' ? schema.type : '';
}

function httpPage(): string {
  const document = openApiDocument() as { paths: Record<string, Record<string, Json>> };
  const sections: string[] = [];
  for (const [path, methods] of Object.entries(document.paths))
    for (const [method, op] of Object.entries(methods)) {
      const lines = [`## \`${method.toUpperCase()} ${path}\``, '', cell(String(op.summary)), ''];
      if (Array.isArray(op.security) && op.security.length === 0) lines.push('Needs no token.', '');
      const params = (op.parameters ?? []) as Json[];
      if (params.length > 0) {
        lines.push('| parameter | in | type | description |', '| --- | --- | --- | --- |');
        for (const p of params)
          lines.push(
            `| \`${String(p.name)}\` | ${String(p.in)} | ${cell(typeOf(p.schema as Json))} | ${cell(String(p.description ?? (p.schema as Json | undefined)?.description ?? ''))} |`,
          );
        lines.push('');
      }
      lines.push('| status | response |', '| --- | --- |');
      for (const [status, response] of Object.entries(op.responses as Record<string, Json>)) {
        const content = (response.content ?? {}) as Record<string, Json>;
        const media = Object.entries(content)
          .map(([type, body]) => `${type} ${typeOf(body.schema as Json)}`.trim())
          .join('; ');
        lines.push(
          `| ${status} | ${cell(`${String(response.description ?? '')}${media ? ` (${media})` : ''}`)} |`,
        );
      }
      sections.push(lines.join('\n') + '\n');
    }
  return `${HEADER('the OpenAPI document the daemon serves at /api/openapi.json')}# HTTP API reference\n\nEvery route the daemon serves; the machine-readable form is \`GET /api/openapi.json\`. Errors are RFC 9457 problem+json (see [errors](errors.md)).\n\n${sections.join('\n')}`;
}

function errorsPage(): string {
  const codes = Object.entries(ERROR_CODES).map(([code, meaning]) => `| \`${code}\` | ${cell(meaning)} |`);
  const problems = (Object.keys(PROBLEM_KINDS) as ProblemKind[]).map((kind) => {
    const { status, title } = PROBLEM_KINDS[kind];
    return `| \`${PROBLEM_TYPE_BASE}${kind}\` | ${status} ${title} | \`${problemCode(kind)}\` |`;
  });
  return [
    `${HEADER('core/error-codes.ts and core/problem-kinds.ts')}# Errors reference`,
    '',
    "Every error kreplay gives carries a stable `code` (the CLI prints it in parentheses, the HTTP API in the problem's `code`).",
    '',
    '## Error codes',
    '',
    '| code | meaning |',
    '| --- | --- |',
    ...codes,
    '',
    '## HTTP problem types',
    '',
    '| type | status | code |',
    '| --- | --- | --- |',
    ...problems,
    '',
    '## Retired codes',
    '',
    'Codes kreplay gave once and gives no more; none is given again with another meaning.',
    '',
    '| code | meant |',
    '| --- | --- |',
    ...Object.entries(RETIRED_ERROR_CODES).map(([code, meant]) => `| \`${code}\` | ${cell(meant)} |`),
    '',
  ].join('\n');
}

/** Each generated page by its path from the repository's root. */
export async function referencePages(): Promise<Record<string, string>> {
  return {
    'docs/reference/cli.md': cliPage(),
    'docs/reference/http-api.md': httpPage(),
    'docs/reference/errors.md': errorsPage(),
    'docs/reference/metrics.md': await metricsPage(),
    'docs/reference/config.md': configPage(),
  };
}
