/** The session state machine: which control leads where; anything else is a 409. */
import { ProblemError } from '../../http/problem';

export const SESSION_STATES = ['ready', 'playing', 'paused', 'finished', 'stopped'] as const;
export type SessionState = (typeof SESSION_STATES)[number];

export const CONTROLS = ['play', 'pause', 'stop', 'seek'] as const;
export type Control = (typeof CONTROLS)[number];

const TRANSITIONS: Record<SessionState, Partial<Record<Control, SessionState>>> = {
  ready: { play: 'playing', stop: 'stopped', seek: 'paused' },
  playing: { pause: 'paused', stop: 'stopped', seek: 'playing' },
  paused: { play: 'playing', stop: 'stopped', seek: 'paused' },
  finished: { stop: 'stopped', seek: 'paused' },
  // stopping a stopped session is a no-op
  stopped: { stop: 'stopped' },
};

/** States that count against the live-session limit and never expire. */
export function isLive(state: SessionState): boolean {
  return state !== 'finished' && state !== 'stopped';
}

/** The state `control` leads to from `state`, or a 409 naming the current state. */
export function nextState(id: string, state: SessionState, control: Control): SessionState {
  const next = TRANSITIONS[state][control];
  if (!next) throw new ProblemError('invalid-state', `session ${id} is ${state}: cannot ${control} it`);
  return next;
}
