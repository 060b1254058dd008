/** The replay clock thread's entry module (see start-thread): runs clockThread with what it may use. */
import fs from 'node:fs';
import os from 'node:os';
import * as threads from 'node:worker_threads';
import { clockSockets } from './clock-sockets';
import { clockThread } from './clock-thread';

clockThread(threads, os, fs, clockSockets);
