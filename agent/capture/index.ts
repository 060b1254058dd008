export { CaptureError } from './capture-error';
export type { CaptureOptions } from './capture-options';
export { startCapture, type Capture } from './start-capture';
export type { ProgramStats } from '../../core/native/addon';
export { clockOffset, ensureTracefs, watchClockSet } from './host';
