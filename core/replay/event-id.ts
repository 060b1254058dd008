/**
 * A replay event's id on its event stream (its index in the replay's order)
 * has at most this many digits: what the daemon takes as Last-Event-ID, and
 * what a client reads as a frame's id.
 */
export const EVENT_ID_DIGITS = 15;
