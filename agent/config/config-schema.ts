/** The agent's optional config file (--config, JSON or YAML). */
import { NODE_NAME, NODE_NAME_RULE } from '../../core/model/node-name';
import { z } from 'zod';

const pattern = z.string().min(1, 'must not be empty');

export const serviceRuleSchema = z
  .object({
    service: z.string().min(1).max(128),
    match: z
      .object({
        unit: pattern.optional().describe('systemd unit, e.g. "nginx.service" or "api-*.service"'),
        cgroup: pattern.optional().describe('cgroup path, e.g. "/system.slice/*"'),
        comm: pattern.optional(),
        exe: pattern.optional().describe('executable path, e.g. "/usr/bin/python3*"'),
      })
      .strict()
      .refine((m) => Object.keys(m).length > 0, 'needs at least one of unit, cgroup, comm, exe'),
  })
  .strict();

export const agentConfigSchema = z
  .object({
    node: z.string().regex(NODE_NAME, NODE_NAME_RULE).optional(),
    services: z.array(serviceRuleSchema).default([]),
  })
  .strict();

export type ServiceRule = z.infer<typeof serviceRuleSchema>;
export type AgentConfig = z.infer<typeof agentConfigSchema>;
