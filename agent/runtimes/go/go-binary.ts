/**
 * Whether a file is a Go program: an ELF64 file with Go's build-info or build-id section, the same
 * test native/probes/go_binary.cc makes before it probes one (stripped programs keep both sections). Go
 * needs no hook: its goroutines are followed by uprobes on its binary (native/probes/go_probes.cc), which
 * log what they follow; the discovery counts its processes (docs/operate.md "Go").
 */
import { closeSync, openSync, readSync } from 'node:fs';

/** Reads up to `bytes` at `offset`; fewer at the end of the file. */
export type FileReader = (offset: number, bytes: number) => Buffer;

const GO_SECTIONS = new Set(['.go.buildinfo', '.note.go.buildid']);
/** Bounds against a damaged or hostile header: real programs stay far below. */
const MAX_SECTIONS = 4096;
const MAX_NAMES_BYTES = 1 << 20;
const HEADER_BYTES = 64;
const SECTION_HEADER_BYTES = 64;

/** The section names of an ELF64 little-endian file; null when it is not one (or is damaged). */
export function elfSectionNames(read: FileReader): string[] | null {
  const h = read(0, HEADER_BYTES);
  // \x7fELF, ELFCLASS64, ELFDATA2LSB
  if (h.length < HEADER_BYTES || h.readUInt32BE(0) !== 0x7f454c46 || h[4] !== 2 || h[5] !== 1) return null;
  const shoff = Number(h.readBigUInt64LE(0x28));
  const entry = h.readUInt16LE(0x3a);
  const count = h.readUInt16LE(0x3c);
  const namesIndex = h.readUInt16LE(0x3e);
  if (
    shoff === 0 ||
    count === 0 ||
    count > MAX_SECTIONS ||
    entry < SECTION_HEADER_BYTES ||
    namesIndex >= count
  )
    return null;
  const table = read(shoff, count * entry);
  if (table.length < count * entry) return null;
  const at = namesIndex * entry;
  const namesOffset = Number(table.readBigUInt64LE(at + 0x18));
  const namesSize = Number(table.readBigUInt64LE(at + 0x20));
  if (namesSize > MAX_NAMES_BYTES) return null;
  const names = read(namesOffset, namesSize);
  const out: string[] = [];
  for (let i = 0; i < count; i++) {
    const start = table.readUInt32LE(i * entry);
    if (start >= names.length) continue;
    const end = names.indexOf(0, start);
    out.push(names.toString('latin1', start, end < 0 ? names.length : end));
  }
  return out;
}

/** Whether the section names are a Go program's. */
export function isGoProgram(sections: readonly string[] | null): boolean {
  return sections?.some((name) => GO_SECTIONS.has(name)) ?? false;
}

/** Whether the file at `path` is a Go program; false when it cannot be read. */
export function isGoFile(path: string): boolean {
  let fd: number;
  try {
    fd = openSync(path, 'r');
  } catch {
    return false;
  }
  try {
    return isGoProgram(
      elfSectionNames((offset, bytes) => {
        const buf = Buffer.alloc(bytes);
        return buf.subarray(0, readSync(fd, buf, 0, bytes, offset));
      }),
    );
  } catch {
    return false;
  } finally {
    closeSync(fd);
  }
}

/** Why a Go process gets no hook: what follows it instead. */
export const GO_NO_HOOK =
  'Go needs none: its goroutines are followed by uprobes on its binary, which the capture logs';
