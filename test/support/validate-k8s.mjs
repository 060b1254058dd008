// Validates Kubernetes manifests against Kubernetes' own OpenAPI schemas, as compiled by the npm
// package kubernetes-models (ESM only, hence a script of its own the tests run with the pinned
// Node). Usage: validate-k8s.mjs FILE...; prints one JSON array: { file, apiVersion, kind, name,
// error } per document, error null when it is valid.
import { readFileSync } from 'node:fs';
import process from 'node:process';
import { parseAllDocuments } from 'yaml';

/** apiVersion (group/version, or v1 for the core group) -> its kubernetes-models module */
const moduleOf = (apiVersion) => `kubernetes-models/${apiVersion}`;

const out = [];
for (const file of process.argv.slice(2)) {
  for (const doc of parseAllDocuments(readFileSync(file, 'utf8'))) {
    const body = doc.toJS();
    if (body === null) continue;
    const entry = {
      file,
      apiVersion: body.apiVersion,
      kind: body.kind,
      name: body.metadata?.name,
      error: null,
    };
    try {
      if (doc.errors.length > 0) throw new Error(doc.errors.map((e) => e.message).join('; '));
      const models = await import(moduleOf(String(body.apiVersion))).catch(() => {
        throw new Error(`no schema for apiVersion ${body.apiVersion}`);
      });
      const Model = models[body.kind];
      if (typeof Model !== 'function')
        throw new Error(`no schema for kind ${body.kind} in ${body.apiVersion}`);
      new Model(body).validate();
    } catch (err) {
      entry.error = err.message;
    }
    out.push(entry);
  }
}
process.stdout.write(JSON.stringify(out));
