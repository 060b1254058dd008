/** A query worker module that dies as it starts (a broken build, say): the pool's restart path under test. */
throw new Error('this query worker cannot start');
