/**
 * The injector of each runtime, as the agent's options set them: a hook turned off (or one this
 * machine cannot run) leaves its processes alone, each counted `refused` with why, never silently.
 */
import type { Logger } from '../../../core/log/logger';
import type { NativeAddon } from '../../../core/native/addon';
import { GO_NO_HOOK } from '../go/go-binary';
import { JvmHookInjector } from '../jvm/jvm-hooks';
import { NodeHookInjector } from '../node/node-hooks';
import { PythonHookInjector } from '../python/python-hooks';
import type { Classification, InjectResult, RuntimeInjector, RuntimeInjectors } from './runtime-hook';

export interface InjectorOptions {
  /** --no-node-hook: false */
  nodeHook: boolean;
  /** --no-python-hook: false */
  pythonHook: boolean;
  followLibuv(pid: number): void;
  /** the kernel guard of the Node inspectors */
  addon: Pick<NativeAddon, 'InspectorGuard'>;
  log: Logger;
}

/** An injector that sends nothing and answers `outcome` with `reason` for every process. */
export function leaveAlone<C extends Classification>(
  outcome: 'refused' | 'no_hook',
  reason: string,
): RuntimeInjector<C> {
  const result: InjectResult = { outcome, reason };
  return { maxTries: 1, hookedMessage: '', inject: () => Promise.resolve(result) };
}

export function runtimeInjectors(options: InjectorOptions): RuntimeInjectors {
  return {
    node: options.nodeHook
      ? new NodeHookInjector({ followLibuv: options.followLibuv, addon: options.addon, log: options.log })
      : leaveAlone('refused', 'the Node hook is off (--no-node-hook)'),
    // queued with ptrace from native/python/py_inject.cc, which drives x86-64 registers
    python: !options.pythonHook
      ? leaveAlone('refused', 'the Python hook is off (--no-python-hook)')
      : process.arch !== 'x64'
        ? leaveAlone(
            'refused',
            `no Python hook on ${process.arch}: asyncio and pool servers stay unattributed`,
          )
        : new PythonHookInjector(),
    go: leaveAlone('no_hook', GO_NO_HOOK),
    jvm: new JvmHookInjector(),
  };
}
