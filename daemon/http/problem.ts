/** RFC 9457 problem details: the one error shape of the HTTP API. */
export interface ParamError {
  param: string;
  message: string;
}

export interface Problem {
  type: string;
  title: string;
  status: number;
  detail: string;
  errors?: ParamError[];
}

const TITLES: Record<number, string> = {
  400: 'Bad Request',
  404: 'Not Found',
  405: 'Method Not Allowed',
  409: 'Conflict',
  413: 'Content Too Large',
  415: 'Unsupported Media Type',
  429: 'Too Many Requests',
  500: 'Internal Server Error',
  503: 'Service Unavailable',
};

export class ProblemError extends Error {
  constructor(
    readonly status: number,
    readonly detail: string,
    readonly errors?: ParamError[],
    readonly headers?: Record<string, string>,
  ) {
    super(detail);
    this.name = 'ProblemError';
  }

  toProblem(): Problem {
    const problem: Problem = {
      type: `https://kreplay.dev/problems/${this.status}`,
      title: TITLES[this.status] ?? 'Error',
      status: this.status,
      detail: this.detail,
    };
    if (this.errors) problem.errors = this.errors;
    return problem;
  }
}

export function badRequest(errors: ParamError[]): ProblemError {
  const detail = errors.map((e) => `${e.param}: ${e.message}`).join('; ');
  return new ProblemError(400, detail, errors);
}

export function notFound(detail: string): ProblemError {
  return new ProblemError(404, detail);
}
