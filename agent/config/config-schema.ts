/** The agent's optional config file (--config, JSON or YAML). */
import { NODE_NAME, NODE_NAME_RULE } from '../../core/model/node-name';
import { z } from 'zod';
import { parseHookSelector, parseSampleRate, parseSelector, SelectorError } from '../filter/selector';
import { OTLP_PROTOCOLS } from '../../core/otlp/otlp-protocols';
import { DEFAULT_MAX_SPANS_PER_TRACE, DEFAULT_QUEUE_SPANS, OTLP_SAMPLING } from '../otlp/otlp-target';

const pattern = z.string().min(1, 'must not be empty');

export const serviceRuleSchema = z
  .object({
    service: z.string().min(1).max(128).describe('the service name the rule gives, at most 128 characters'),
    match: z
      .object({
        unit: pattern.optional().describe('systemd unit, e.g. "nginx.service" or "api-*.service"'),
        cgroup: pattern.optional().describe('cgroup path, e.g. "/system.slice/*"'),
        comm: pattern.optional().describe('the thread\'s comm (at most 15 characters), e.g. "python3*"'),
        exe: pattern.optional().describe('executable path, e.g. "/usr/bin/python3*"'),
      })
      .strict()
      .refine((m) => Object.keys(m).length > 0, 'needs at least one of unit, cgroup, comm, exe')
      .describe(
        'conditions that must all hold (shell patterns: * any run of characters, ? one); at least one',
      ),
  })
  .strict();

/** A value the filter's own parser checks (one owner of the syntax), its message kept. */
function parsedBy<T>(parse: (text: string) => T) {
  return z.string().transform((text, ctx) => {
    try {
      return parse(text);
    } catch (err) {
      if (!(err instanceof SelectorError)) throw err;
      ctx.addIssue({ code: 'custom', message: err.message });
      return z.NEVER;
    }
  });
}

/** What is captured: the same selectors as --include/--exclude, which add to these. */
export const captureConfigSchema = z
  .object({
    include: z
      .array(parsedBy(parseSelector))
      .optional()
      .describe('only capture the tasks one of these selectors names (--include adds to them)'),
    exclude: z
      .array(parsedBy(parseSelector))
      .default([])
      .describe(
        'never capture the tasks these selectors name; wins over any include (--exclude adds to them)',
      ),
    filter_transactions: z
      .boolean()
      .default(false)
      .describe('excluded tasks lose their transaction events too (--filter-transactions)'),
    sample_background: z
      .union([z.number().transform(String), z.string()])
      .pipe(parsedBy(parseSampleRate))
      .default(1)
      .describe(
        '1/N: keep one in N writes made outside any transaction (default 1: all of them; --sample-background)',
      ),
    capture_reads: z
      .boolean()
      .default(false)
      .describe('record the reads of threads outside any transaction too (--capture-reads)'),
    node_hook: z
      .boolean()
      .default(true)
      .describe(
        'hook the Node processes the filters include to follow their requests (false: --no-node-hook)',
      ),
    hook_include: z
      .array(parsedBy(parseHookSelector))
      .optional()
      .describe(
        'only hook the Node and Python processes these selectors name (service:, cgroup:, comm:, exe:, pid:, cgroup-id:; --hook-include adds to them); default: processes that listen on TCP and their children',
      ),
    hook_exclude: z
      .array(parsedBy(parseHookSelector))
      .default([])
      .describe('never hook the processes these selectors name (--hook-exclude adds to them)'),
    python_hook: z
      .boolean()
      .default(true)
      .describe(
        'queue the Python hook into the CPython 3.11-3.13 processes the filters include (false: --no-python-hook)',
      ),
  })
  .strict();

/** The OTLP export (--otlp and its flags, which win over these). */
export const otlpConfigSchema = z
  .object({
    endpoint: z
      .string()
      .min(1)
      .describe('base URL of the OTLP/HTTP receiver; /v1/traces is appended (--otlp)'),
    protocol: z.enum(OTLP_PROTOCOLS).optional().describe('http/protobuf (the default) or http/json'),
    sample: z
      .enum(OTLP_SAMPLING)
      .optional()
      .describe('sampled (the default): only traces whose traceparent is sampled; all: every trace'),
    headers: z
      .record(z.string().regex(/^[!#$%&'*+.^_`|~0-9A-Za-z-]+$/, 'must be an HTTP header name'), z.string())
      .optional()
      .describe('sent with every request, e.g. a token: {authorization: "Bearer …"}'),
    certificate: z.string().min(1).optional().describe('PEM file of the CA that signs the receiver (https)'),
    max_spans_per_trace: z
      .number()
      .int()
      .min(1)
      .optional()
      .describe(
        `a trace's spans sent one by one, the rest in one summary span (default ${DEFAULT_MAX_SPANS_PER_TRACE}; --otlp-max-spans-per-trace)`,
      ),
    queue_spans: z
      .number()
      .int()
      .min(1)
      .optional()
      .describe(
        `spans waiting to be sent; past it they are dropped, counted (default ${DEFAULT_QUEUE_SPANS}; --otlp-queue)`,
      ),
  })
  .strict();

export const agentConfigSchema = z
  .object({
    node: z
      .string()
      .regex(NODE_NAME, NODE_NAME_RULE)
      .optional()
      .describe(
        'stored with every event and naming the store file NODE.db (default: the host name; --node wins)',
      ),
    services: z
      .array(serviceRuleSchema)
      .default([])
      .describe(
        "rules tried in order: the first whose conditions all hold names the process's service (none: its systemd unit without .service, else its comm)",
      ),
    capture: captureConfigSchema.prefault({}).describe('what is captured; the flags add to these lists'),
    otlp: otlpConfigSchema.optional().describe('the OTLP export; its flags win over these'),
  })
  .strict();

export type ServiceRule = z.infer<typeof serviceRuleSchema>;
export type AgentConfig = z.infer<typeof agentConfigSchema>;
export type CaptureConfig = z.infer<typeof captureConfigSchema>;
export type OtlpConfig = z.infer<typeof otlpConfigSchema>;
