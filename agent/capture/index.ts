export { CaptureError } from './capture-error';
export type { CaptureOptions } from './capture-options';
export { startCapture, type Capture } from './start-capture';
export { clockOffset, ensureTracefs } from './host';
