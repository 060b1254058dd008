export { CaptureError } from './capture-error';
export type { CaptureOptions } from './capture-options';
export { startCapture, type Capture } from './start-capture';
export type { ProgramStats } from './native-addon';
export { captureSupport, clockOffset, ensureTracefs } from './host';
export {
  decodeRecords,
  type DecodedRecord,
  type DecodedSysWrite,
  type DecodedBlockIo,
  type DecodedContext,
  type DecodedTarget,
} from './decode-records';
