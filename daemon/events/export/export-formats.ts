/** The export formats, the API's and the CLI's, apart from the query schema (no zod for a CLI start). */
export const EXPORT_FORMATS = ['chrome-trace', 'incident', 'otlp'] as const;
