/**
 * What replay reads from the node stores. Structural, so that unit tests pass
 * a small in-memory fake and the daemon passes its NodeStores.
 */
import type { NodeStores } from '../store/node-stores';

export type ReplaySource = Pick<NodeStores, 'iterate' | 'summarize'>;
