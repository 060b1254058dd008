/** RFC 9457 problem details: the one error shape of the HTTP API. */
import { KreplayError } from '../../core/errors';
import { PROBLEM_KINDS, problemType, type ProblemKind } from './problem-kinds';

export interface ParamError {
  param: string;
  message: string;
}

export interface Problem {
  type: string;
  title: string;
  status: number;
  detail: string;
  code: string;
  errors?: ParamError[];
}

const TITLES: Record<number, string> = {
  400: 'Bad Request',
  404: 'Not Found',
  409: 'Conflict',
  413: 'Content Too Large',
  415: 'Unsupported Media Type',
  429: 'Too Many Requests',
  500: 'Internal Server Error',
  503: 'Service Unavailable',
};

export class ProblemError extends KreplayError {
  readonly status: number;

  constructor(
    readonly kind: ProblemKind,
    readonly detail: string,
    readonly errors?: ParamError[],
    readonly headers?: Record<string, string>,
  ) {
    super(PROBLEM_KINDS[kind].code, detail);
    this.status = PROBLEM_KINDS[kind].status;
  }

  toProblem(): Problem {
    const problem: Problem = {
      type: problemType(this.kind),
      title: TITLES[this.status] ?? 'Error',
      status: this.status,
      detail: this.detail,
      code: this.code,
    };
    if (this.errors) problem.errors = this.errors;
    return problem;
  }
}

export function badRequest(
  errors: ParamError[],
  kind: 'invalid-parameter' | 'invalid-body' = 'invalid-parameter',
): ProblemError {
  const detail = errors.map((e) => `${e.param}: ${e.message}`).join('; ');
  return new ProblemError(kind, detail, errors);
}
