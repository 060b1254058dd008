{
  'targets': [
    {
      'target_name': 'kreplay_native',
      'sources': [
        'addon.cc',
        'capture_engine.cc',
        'capture_error.cc',
        'capture_session.cc',
        'exec_binding.cc',
        'exec_call.cc',
        'exec_match.cc',
        'exec_proc_net.cc',
        'exec_relay.cc',
        'exec_supervisor.cc',
        'exec_target.cc',
        'file_lock.cc',
        'host_clock.cc',
        'kernel_features.cc',
        'native_log.cc',
        'py_inject.cc',
        'request_key.cc',
        'ring_reader.cc',
        'thread_scheduling.cc',
        'tls_probes.cc',
        'tracefs.cc',
      ],
      # capture.skel.h comes from `make`; capture.h is shared with the BPF side.
      'include_dirs': [
        "<!(node -p \"require('node-addon-api').include_dir\")",
        '../build/bpf',
        '../bpf',
      ],
      # node-addon-api with C++ exceptions: errors cross to JS as thrown Napi::Errors.
      'defines': ['NAPI_VERSION=8', 'NAPI_CPP_EXCEPTIONS'],
      'cflags!': ['-fno-exceptions'],
      'cflags_cc!': ['-fno-exceptions'],
      'cflags_cc': ['-std=c++17', '-Wall', '-Wextra', '<!@(pkg-config --cflags libbpf)'],
      'libraries': ['<!@(pkg-config --libs libbpf)', '-lelf', '-lz'],
    },
  ],
}
