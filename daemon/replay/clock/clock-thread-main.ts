/** The clock worker's entry module (see core/worker.ts): runs the clock thread with the modules it uses. */
import fs from 'node:fs';
import os from 'node:os';
import threads from 'node:worker_threads';
import { clockThread } from './clock-thread';

clockThread(threads, os, fs);
