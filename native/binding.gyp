{
  'targets': [
    {
      'target_name': 'kreplay_native',
      'sources': [
        'addon.cc',
        'bpf_links.cc',
        'capture_engine.cc',
        'capture_error.cc',
        'capture_session.cc',
        'elf_file.cc',
        'exec_binding.cc',
        'exec_call.cc',
        'exec_match.cc',
        'exec_proc_net.cc',
        'exec_relay.cc',
        'exec_supervisor.cc',
        'exec_target.cc',
        'file_lock.cc',
        'go_binary.cc',
        'go_probes.cc',
        'host_clock.cc',
        'kernel_features.cc',
        'native_log.cc',
        'process_scan.cc',
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
      # capstone: the Go probes find runtime.newproc1's RET instructions by disassembly
      'libraries': ['<!@(pkg-config --libs libbpf)', '-lelf', '-lz', '-lcapstone'],
    },
  ],
}
