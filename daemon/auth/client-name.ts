/**
 * Who a request comes from, for per-client limits: the name of its bearer
 * token where the daemon has tokens (set by requireToken), else its address.
 * Every loopback address is one client, "loopback": a process on the host
 * can send from any of 127.0.0.0/8 (and ::1), so keying by the address would
 * let one local client take every slot by rotating its source. Without
 * tokens the daemon listens on loopback only, so all local clients share the
 * per-client limits; give them tokens to tell them apart.
 */
import type { Request, Response } from 'express';

export function setTokenClient(res: Response, tokenName: string): void {
  res.locals.client = `token ${tokenName}`;
}

/** True for an IPv4 or IPv6 loopback address, IPv4-mapped included. */
export function isLoopbackAddress(address: string): boolean {
  const v4 = address.startsWith('::ffff:') ? address.slice('::ffff:'.length) : address;
  return /^127\.\d{1,3}\.\d{1,3}\.\d{1,3}$/.test(v4) || address === '::1';
}

export function clientName(req: Request, res: Response): string {
  const token = res.locals.client as string | undefined;
  if (token) return token;
  const address = req.socket.remoteAddress ?? 'unknown';
  return isLoopbackAddress(address) ? 'loopback' : `address ${address}`;
}
