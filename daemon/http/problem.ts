/** RFC 9457 problem details: the one error shape of the HTTP API. */
import { KreplayError } from '../../core/errors';
import { PROBLEM_KINDS, PROBLEM_TYPE_BASE, problemCode, type ProblemKind } from '../../core/problem-kinds';

export interface ParamError {
  param: string;
  message: string;
}

export interface Problem {
  type: string;
  title: string;
  status: number;
  code: string;
  detail: string;
  errors?: ParamError[];
}

export class ProblemError extends KreplayError {
  readonly status: number;

  constructor(
    readonly kind: ProblemKind,
    readonly detail: string,
    readonly errors?: ParamError[],
    readonly headers?: Record<string, string>,
  ) {
    super(problemCode(kind), detail);
    this.status = PROBLEM_KINDS[kind].status;
  }

  toProblem(): Problem {
    const problem: Problem = {
      type: PROBLEM_TYPE_BASE + this.kind,
      title: PROBLEM_KINDS[this.kind].title,
      status: this.status,
      code: this.code,
      detail: this.detail,
    };
    if (this.errors) problem.errors = this.errors;
    return problem;
  }
}

export function badRequest(errors: ParamError[], kind: ProblemKind = 'invalid-parameter'): ProblemError {
  const detail = errors.map((e) => `${e.param}: ${e.message}`).join('; ');
  return new ProblemError(kind, detail, errors);
}

export function notFound(kind: ProblemKind, detail: string): ProblemError {
  return new ProblemError(kind, detail);
}
