export * from './record-layout';
export * from './event-types';
export * from './event-id';
export * from './event';
export * from './target';
export * from './node-name';
export * from './container';
