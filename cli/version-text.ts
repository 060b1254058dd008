/** What `kreplay --version` prints: the version, then what the build and the run depend on. */
import { nativeAddon } from '../core/native/addon';
import { buildCommit, VERSION } from '../core/version';

function libbpfVersion(): string {
  try {
    return nativeAddon().libbpfVersion().replace(/^v/, '');
  } catch (err) {
    return `unavailable (${(err as Error).message})`;
  }
}

/** `kreplay 0.1.0` and one `name: value` line each for the commit, Node and libbpf. */
export function versionText(): string {
  return [
    `kreplay ${VERSION}`,
    `commit: ${buildCommit()}`,
    `node: ${process.versions.node}`,
    `libbpf: ${libbpfVersion()}`,
  ].join('\n');
}
