/**
 * zod building blocks for query strings parsed by Express's "simple" parser:
 * every parameter is one string (a repeated one arrives as an array), and a
 * failure becomes a 400 problem naming each parameter at fault.
 */
import { z } from 'zod';
import { badRequest, type ParamError } from './problem';
import { InvalidValue, parseChoice } from './query-values';

const MAX_NAME_SHOWN = 100;

export const singleParam = z.string({
  error: (issue) => (Array.isArray(issue.input) ? 'given more than once' : 'expected a single value'),
});

/** A single string turned into a value by `parse`, whose InvalidValue message becomes the issue. */
export function parsedParam<T>(parse: (text: string) => T) {
  return singleParam.transform((text, ctx): T => {
    try {
      return parse(text);
    } catch (err) {
      if (!(err instanceof InvalidValue)) throw err;
      ctx.issues.push({ code: 'custom', message: err.message, input: text });
      return z.NEVER;
    }
  });
}

/** One of `choices`; the API description lists them. */
export function choiceParam<const T extends string>(choices: readonly T[]) {
  return parsedParam(parseChoice(choices)).meta({ enum: [...choices] });
}

function paramErrors(error: z.ZodError): ParamError[] {
  return error.issues.flatMap((issue) =>
    issue.code === 'unrecognized_keys'
      ? issue.keys.map((key) => ({ param: key.slice(0, MAX_NAME_SHOWN), message: 'unknown parameter' }))
      : [{ param: String(issue.path[0] ?? 'query'), message: issue.message }],
  );
}

/** The parsed query, or a 400 problem listing every bad parameter. */
export function parseQuery<S extends z.ZodType>(schema: S, query: unknown): z.output<S> {
  const result = schema.safeParse(query);
  if (!result.success) throw badRequest(paramErrors(result.error));
  return result.data;
}
