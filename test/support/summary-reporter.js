'use strict';
/** Ends every run with one plain line CI can read: "summary: N passed, N failed, N skipped". */
class SummaryReporter {
  onRunComplete(_contexts, results) {
    // a suite that could not run has no failed tests of its own; count it once
    const brokenSuites = results.numRuntimeErrorTestSuites;
    process.stdout.write(
      `\nsummary: ${results.numPassedTests} passed, ${results.numFailedTests + brokenSuites} failed, ${results.numPendingTests} skipped\n`,
    );
  }
}
module.exports = SummaryReporter;
