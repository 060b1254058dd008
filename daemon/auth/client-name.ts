/**
 * Who a request comes from, for per-client limits: the name of its bearer
 * token where the daemon has tokens (set by requireToken), else its address.
 */
import type { Request, Response } from 'express';

export function setTokenClient(res: Response, tokenName: string): void {
  res.locals.client = `token ${tokenName}`;
}

export function clientName(req: Request, res: Response): string {
  const token = res.locals.client as string | undefined;
  return token ?? `address ${req.socket.remoteAddress ?? 'unknown'}`;
}
