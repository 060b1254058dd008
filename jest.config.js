/** Two projects: `unit` needs nothing but Node; `integration` loads real eBPF and runs servers. */
const common = {
  preset: 'ts-jest',
  testEnvironment: 'node',
  transform: { '^.+\\.ts$': ['ts-jest', { tsconfig: 'tsconfig.json' }] },
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
  ],
};
