'use strict';
/** Ends every run with one plain line CI can read: "summary: N passed, N failed, N skipped". */
class SummaryReporter {
  onRunComplete(_contexts, results) {
    const failedSuites = results.numFailedTestSuites + results.numRuntimeErrorTestSuites;
    process.stdout.write(
      `\nsummary: ${results.numPassedTests} passed, ${results.numFailedTests + failedSuites} failed, ${results.numPendingTests} skipped\n`,
    );
  }
}
module.exports = SummaryReporter;
