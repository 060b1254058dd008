import { followResuming, type FollowOnce } from '../../core/stream-resume';

const reset = () =>
  Object.assign(new Error('the event stream closed before its end'), { code: 'ECONNRESET' });
const refused = () => Object.assign(new Error('connect ECONNREFUSED'), { code: 'ECONNREFUSED' });

/**
 * Connections played from a script: each step moves the last event id seen
 * (events came) or not, then finishes, ends or throws; what the follower
 * did in between (its pauses, in order with the connections) is logged.
 */
function scripted(steps: { events: boolean; then: 'finished' | 'ended' | (() => Error) }[]) {
  const log: string[] = [];
  let lastId: string | undefined;
  let seen = 0;
  const follow: FollowOnce = () => {
    const step = steps[log.filter((entry) => entry.startsWith('connect')).length];
    log.push(`connect ${lastId ?? '-'}`);
    if (!step) throw new Error('more connections than scripted');
    if (step.events) lastId = String((seen += 10));
    if (step.then === 'finished') return Promise.resolve(true);
    if (step.then === 'ended') return Promise.resolve(false);
    return Promise.reject(step.then());
  };
  const hooks = {
    lastSeen: () => lastId,
    pause: (ms: number) => {
      log.push(`pause ${ms}`);
      return Promise.resolve();
    },
    retriable: (err: unknown) => typeof (err as { code?: unknown }).code === 'string',
    giveUp: (err: unknown) => new Error(err ? `unreachable: ${(err as Error).message}` : 'keeps ending'),
  };
  return { log, follow, hooks };
}

const policy = { attempts: 2, waitMs: 500 };

describe('followResuming', () => {
  it('resumes a stream cut after it brought events at once, with the last id, however often it is cut', async () => {
    const { log, follow, hooks } = scripted([
      { events: true, then: reset },
      { events: true, then: 'ended' },
      { events: true, then: reset },
      { events: true, then: 'finished' },
    ]);
    await followResuming(follow, policy, hooks);
    expect(log).toEqual(['connect -', 'connect 10', 'connect 20', 'connect 30']);
  });

  it('waits before retrying a connection that brought nothing, and gives up after the attempts in a row', async () => {
    const { log, follow, hooks } = scripted([
      { events: true, then: reset },
      { events: false, then: refused },
      { events: true, then: reset },
      { events: false, then: refused },
      { events: false, then: 'ended' },
      { events: false, then: refused },
    ]);
    await expect(followResuming(follow, policy, hooks)).rejects.toThrow('unreachable: connect ECONNREFUSED');
    expect(log).toEqual([
      'connect -',
      'connect 10',
      'pause 500',
      'connect 10',
      'connect 20',
      'pause 500',
      'connect 20',
      'pause 500',
      'connect 20',
    ]);
  });

  it('says the stream keeps ending when no connection failed but none brought anything', async () => {
    const { follow, hooks } = scripted([
      { events: false, then: 'ended' },
      { events: false, then: 'ended' },
      { events: false, then: 'ended' },
    ]);
    await expect(followResuming(follow, policy, hooks)).rejects.toThrow('keeps ending');
  });

  it('passes an answer (an error without a system code) through without a retry', async () => {
    const { log, follow, hooks } = scripted([
      { events: true, then: () => new Error('session s1 was stopped') },
    ]);
    await expect(followResuming(follow, policy, hooks)).rejects.toThrow('session s1 was stopped');
    expect(log).toEqual(['connect -']);
  });
});
