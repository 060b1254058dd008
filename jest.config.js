/**
 * Projects: `unit` needs no kernel, no root and no server, but what `make build` makes: the
 * agent's SQLite extension (build/kreplay-sqlite.so, loaded by the store tests), the native addon
 * (request keys, and replay --exec's matcher through execMatch), gcc (record-layout and
 * batch-columns compile C tables to compare them) and the zstd and jq programs (incident-file reads a
 * file as the docs show); `integration` loads real eBPF and runs servers;
 * `browser` drives Chromium; `system` (only with KREPLAY_TEST_SYSTEM=1, which `make test-system`
 * sets) boots Debian under systemd-nspawn and runs the .deb there.
 */
// The agents tests start hook the Node and Python processes their filters include (docs/operate.md
// "The Node hook", "The Python hook"): jest's workers and every process they start opt out; a test
// that wants a server hooked lifts it for that server (test/support/request-accuracy.ts). The
// Makefile sets it for jest itself.
process.env.KREPLAY_NODE_HOOK ??= 'off';
process.env.KREPLAY_PYTHON_HOOK ??= 'off';
process.env.KREPLAY_JVM_HOOK ??= 'off';

const common = {
  preset: 'ts-jest',
  testEnvironment: 'node',
  transform: { '^.+\\.ts$': ['ts-jest', { tsconfig: 'tsconfig.json' }] },
  // build/ holds the staged package trees of `make deb` and `make dist`, each with a package.json
  modulePathIgnorePatterns: ['<rootDir>/build/'],
};
module.exports = {
  // kernel and server tests wait for real processes
  testTimeout: 120000,
  reporters: ['default', '<rootDir>/test/support/summary-reporter.js'],
  projects: [
    { ...common, displayName: 'unit', testMatch: ['<rootDir>/test/unit/**/*.test.ts'] },
    {
      ...common,
      displayName: 'integration',
      testMatch: ['<rootDir>/test/integration/**/*.test.ts'],
    },
    // the page in Debian's Chromium, driven by playwright-core, against a daemon over real recordings
    { ...common, displayName: 'browser', testMatch: ['<rootDir>/test/browser/**/*.test.ts'] },
    ...(process.env.KREPLAY_TEST_SYSTEM === '1'
      ? [{ ...common, displayName: 'system', testMatch: ['<rootDir>/test/system/**/*.test.ts'] }]
      : []),
  ],
};
