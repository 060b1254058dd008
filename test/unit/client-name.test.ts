/** Per-client limits: a token names its client; without one, every loopback address is one client. */
import type { Request, Response } from 'express';
import { clientName, isLoopbackAddress, setTokenClient } from '../../daemon/auth/client-name';

const request = (remoteAddress: string) => ({ socket: { remoteAddress } }) as unknown as Request;
const response = () => ({ locals: {} }) as unknown as Response;

describe('client names', () => {
  it.each(['127.0.0.1', '127.0.0.8', '127.255.1.2', '::1', '::ffff:127.0.0.5'])(
    '%s is loopback',
    (address) => {
      expect(isLoopbackAddress(address)).toBe(true);
      expect(clientName(request(address), response())).toBe('loopback');
    },
  );

  it.each(['10.0.0.1', '::ffff:10.1.2.3', '128.0.0.1', '::2'])('%s is its own client', (address) => {
    expect(isLoopbackAddress(address)).toBe(false);
    expect(clientName(request(address), response())).toBe(`address ${address}`);
  });

  it("names a token's holder whatever its address", () => {
    const res = response();
    setTokenClient(res, 'ci');
    expect(clientName(request('127.0.0.3'), res)).toBe('token ci');
  });
});
