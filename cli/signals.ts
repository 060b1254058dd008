/** How the long-running commands (agent, daemon) learn that it is time to drain. */
import type { Logger } from '../core/log/logger';

/**
 * Resolves with the signal once SIGINT or SIGTERM arrives. Later signals
 * are ignored while draining: Ctrl-C under `kreplay up` reaches a child
 * both from the terminal and from its parent, and must not cut the drain.
 */
export function untilSignal(log: Logger): Promise<NodeJS.Signals> {
  return new Promise((resolve) => {
    let draining = false;
    const on = (signal: NodeJS.Signals) => {
      if (draining) {
        log.info('already draining', { signal });
        return;
      }
      draining = true;
      log.info('draining', { signal });
      resolve(signal);
    };
    process.on('SIGINT', on);
    process.on('SIGTERM', on);
  });
}
