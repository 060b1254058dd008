/** The flags of `kreplay replay --exec` (cli/commands/replay.ts parses them). */
import type { Match, Pace } from './exec-plan';
import type { Tolerance } from './tolerance';
import type { TargetMap } from './target-keys';

export interface ExecFlags {
  speed: number;
  extraLatencyNs: number;
  pace: Pace;
  match: Match;
  replayErrors?: boolean;
  map: TargetMap[];
  report?: string;
  reportJson?: string;
  tolerance: Tolerance;
  strict?: boolean;
  target: string[];
  skipTarget: string[];
  withClient?: boolean;
}
