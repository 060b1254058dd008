/** `--incident FILE --server URL`: the file uploaded to the daemon (POST /api/incidents), which then serves it like a transaction. */
import fs from 'node:fs';
import { authHeaders, problemText, unreachable } from '../daemon-request';

export interface UploadedIncident {
  id: string;
  transaction_id: string;
  events: number;
  digest: string;
}

export async function uploadIncident(server: string, file: string): Promise<UploadedIncident> {
  const url = `${server}/api/incidents`;
  let res: Response;
  try {
    res = await fetch(url, {
      method: 'POST',
      body: fs.readFileSync(file),
      headers: { ...authHeaders(), 'content-type': 'application/octet-stream' },
    });
  } catch (err) {
    throw unreachable(url, err);
  }
  const text = await res.text();
  if (!res.ok) throw new Error(`uploading ${file}: ${problemText(res.status, text)}`);
  return JSON.parse(text) as UploadedIncident;
}
