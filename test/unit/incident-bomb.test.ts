/** Decompression bombs are refused early: on a frame header's declared size, else at a ratio budget. */
import { constants, zstdCompressSync } from 'node:zlib';
import { decodeIncident, IncidentWriter } from '../../core/incident';
import { declaredContentSize, inflateBudget, MAX_INFLATE_RATIO } from '../../core/incident/incident-codec';
import { incidentEvents } from '../support/incident-events';

/** A zstd frame header declaring `size` bytes of content (8-byte field, single segment), then junk. */
function declaring(size: bigint): Buffer {
  const fcs = Buffer.alloc(8);
  fcs.writeBigUInt64LE(size);
  return Buffer.concat([Buffer.from([0x28, 0xb5, 0x2f, 0xfd, 0xe0]), fcs, Buffer.alloc(64, 7)]);
}

describe('incident decompression budget', () => {
  it("reads a frame header's declared content size", () => {
    expect(declaredContentSize(declaring(4n << 30n))).toBe(4 * 2 ** 30);
    const real = zstdCompressSync(Buffer.alloc(1000, 1), {
      params: { [constants.ZSTD_c_contentSizeFlag]: 1 },
    });
    expect(declaredContentSize(real)).toBe(1000);
    const undeclared = zstdCompressSync(Buffer.alloc(1000, 1), {
      params: { [constants.ZSTD_c_contentSizeFlag]: 0 },
    });
    expect(declaredContentSize(undeclared)).toBeNull();
  });

  it('refuses a header declaring 4 GB from a few bytes without inflating anything', () => {
    // the declared size in the message: refused on the header's word, before any inflating
    expect(() => decodeIncident(declaring(4n << 30n), 'bomb.kri')).toThrow(
      /would inflate 77 bytes to 4294967296 bytes of JSON.*decompression bomb/,
    );
  });

  it('stops a bomb that declares nothing at its ratio budget', () => {
    const bomb = zstdCompressSync(Buffer.alloc(200 << 20), {
      params: { [constants.ZSTD_c_contentSizeFlag]: 0 },
    });
    expect(bomb.length * MAX_INFLATE_RATIO).toBeLessThan(64 << 20); // the floor applies
    expect(inflateBudget(bomb.length)).toBe(64 << 20);
    expect(() => decodeIncident(bomb, 'bomb.kri')).toThrow(
      /more than 67108864 bytes of JSON.*decompression bomb/,
    );
  });

  it('still reads a real incident, which compresses far less than the ratio', () => {
    const writer = new IncidentWriter({
      transactionId: 'OK-1',
      source: 'node-stores',
      exportedAt: '2026-11-24T00:00:00.000Z',
    });
    for (const e of incidentEvents(2000, 'OK-1')) writer.add(e);
    const bytes = writer.finish(null);
    expect(decodeIncident(bytes, 'ok.kri').events).toHaveLength(2000);
  });
});
