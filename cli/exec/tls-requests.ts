/**
 * Requests the capture and the relay know only by their TLS record (native/capture/request_key.cc): the
 * keys of the record types, from the one owner of recognition and hashing, fed a record header of
 * each type. A response whose requests are all such records is matched by record type and order.
 */
import { nativeAddon } from '../../core/native/addon';

let keys: Set<number> | null = null;

function tlsKeys(): Set<number> {
  if (!keys) {
    const { requestKey } = nativeAddon();
    const record = (type: number, first: number) => Buffer.from([type, 3, 3, 0, 1, first]);
    // ChangeCipherSpec, alert, a ClientHello and other handshake messages, application data
    keys = new Set(
      [record(0x14, 1), record(0x15, 1), record(0x16, 1), record(0x16, 2), record(0x17, 0)].map((header) =>
        requestKey(header),
      ),
    );
  }
  return keys;
}

/** Whether every key is a TLS record's (and there is one). */
export function allTlsRequests(requestKeys: Iterable<number>): boolean {
  let any = false;
  for (const key of requestKeys) {
    if (!tlsKeys().has(key)) return false;
    any = true;
  }
  return any;
}

/** What a report says of how a response over TLS was matched. */
export const TLS_MATCH_RULE =
  'requests known by their TLS record type, matched in order (the plaintext is out of reach; ciphertext is never compared)';
