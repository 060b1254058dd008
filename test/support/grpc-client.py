"""Calls the grpc-file-server: <n> calls of <method> (Unary or Stream), <c> at a time on one
channel (one HTTP/2 connection), each with x-request-id <prefix><i> and a traceparent.
Args: port method prefix n c. Exits 0 when every call succeeded.
"""
import sys
from concurrent import futures

import grpc

port, method, prefix, n, c = sys.argv[1], sys.argv[2], sys.argv[3], int(sys.argv[4]), int(sys.argv[5])
channel = grpc.insecure_channel(f"127.0.0.1:{port}")
call = (channel.unary_unary if method == "Unary" else channel.unary_stream)(f"/kr.Files/{method}")


def one(i):
    md = (("x-request-id", f"{prefix}{i}"), ("traceparent", f"00-{i + 1:032x}-00f067aa0ba902b7-01"))
    result = call(b"x", metadata=md, timeout=30)
    return result if method == "Unary" else list(result)


with futures.ThreadPoolExecutor(max_workers=c) as pool:
    list(pool.map(one, range(n)))
