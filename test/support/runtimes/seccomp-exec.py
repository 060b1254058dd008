"""Runs a command under a seccomp filter that kills the process at its first getpriority(2) (x86_64):
a hook that signalled with getpriority where a filter may refuse calls would kill the program.
Usage: seccomp-exec.py COMMAND [ARG...] (the command replaces this process: same pid)."""
import ctypes
import os
import sys

PR_SET_NO_NEW_PRIVS, PR_SET_SECCOMP, SECCOMP_MODE_FILTER = 38, 22, 2
NR_GETPRIORITY = 140
LD_NR, JEQ, RET = 0x20, 0x15, 0x06
KILL_PROCESS, ALLOW = 0x80000000, 0x7FFF0000


class SockFilter(ctypes.Structure):
    _fields_ = [("code", ctypes.c_uint16), ("jt", ctypes.c_uint8), ("jf", ctypes.c_uint8), ("k", ctypes.c_uint32)]


class SockFprog(ctypes.Structure):
    _fields_ = [("len", ctypes.c_uint16), ("filter", ctypes.POINTER(SockFilter))]


program = (SockFilter * 4)(
    SockFilter(LD_NR, 0, 0, 0),
    SockFilter(JEQ, 0, 1, NR_GETPRIORITY),
    SockFilter(RET, 0, 0, KILL_PROCESS),
    SockFilter(RET, 0, 0, ALLOW),
)
libc = ctypes.CDLL(None, use_errno=True)
if libc.prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) or libc.prctl(
    PR_SET_SECCOMP, SECCOMP_MODE_FILTER, ctypes.byref(SockFprog(len(program), program)), 0, 0
):
    sys.exit("seccomp-exec: prctl failed: " + os.strerror(ctypes.get_errno()))
os.execv(sys.argv[1], sys.argv[1:])
