'use strict';
/**
 * Ends every run with one plain line CI can read: "summary: N passed, N failed, N skipped".
 * `make test` runs two jest processes side by side; each then writes its counts to the file
 * KREPLAY_TEST_SUMMARY names, and `node test/support/summary-reporter.js FILE...` prints the one
 * line for all of them (a file missing is a run that broke: counted failed).
 */
const { readFileSync, writeFileSync } = require('node:fs');

const line = ({ passed, failed, skipped }) =>
  `\nsummary: ${passed} passed, ${failed} failed, ${skipped} skipped\n`;

class SummaryReporter {
  onRunComplete(_contexts, results) {
    // a suite that could not run has no failed tests of its own; count it once
    const brokenSuites = results.numRuntimeErrorTestSuites;
    const counts = {
      passed: results.numPassedTests,
      failed: results.numFailedTests + brokenSuites,
      skipped: results.numPendingTests,
    };
    const file = process.env.KREPLAY_TEST_SUMMARY;
    if (file) writeFileSync(file, JSON.stringify(counts));
    else process.stdout.write(line(counts));
  }
}

if (require.main === module) {
  const total = { passed: 0, failed: 0, skipped: 0 };
  for (const file of process.argv.slice(2)) {
    try {
      const counts = JSON.parse(readFileSync(file, 'utf8'));
      for (const key of Object.keys(total)) total[key] += counts[key];
    } catch (err) {
      process.stderr.write(`test: no counts from ${file} (${err.message}): that run broke; counted failed\n`);
      total.failed += 1;
    }
  }
  process.stdout.write(line(total));
  process.exitCode = total.failed > 0 ? 1 : 0;
}

module.exports = SummaryReporter;
