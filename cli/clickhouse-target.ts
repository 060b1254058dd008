/** A ClickHouse to write to, from a clickhouse:// URL, a user and a password file or KREPLAY_SHIP_PASSWORD (never a flag value). */
import { readFileSync } from 'node:fs';
import { ClickHouseHttp, parseClickHouseUrl } from '../core/clickhouse/http-client';

export function clickhouseTarget(
  url: string,
  user: string | undefined,
  passwordFile: { flag: string; path: string | undefined },
): ClickHouseHttp {
  const endpoint = parseClickHouseUrl(url);
  let password = process.env.KREPLAY_SHIP_PASSWORD;
  if (passwordFile.path !== undefined) {
    try {
      password = readFileSync(passwordFile.path, 'utf8').replace(/\r?\n$/, '');
    } catch (err) {
      throw new Error(`${passwordFile.flag} ${passwordFile.path}: ${(err as Error).message}`, { cause: err });
    }
  }
  return new ClickHouseHttp({ ...endpoint, user, password });
}
