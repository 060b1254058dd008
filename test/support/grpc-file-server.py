"""A grpcio server (h2c) for the ground-truth tests, with raw-bytes methods.

/kr.Files/Unary writes <dir>/<id>.a; /kr.Files/Stream writes <dir>/<id>.a and answers three
messages, writing <dir>/<id>.s<i> before each; <id> is the call's x-request-id metadata.
Args: dir. Prints its port when it listens.
"""
import os
import sys
from concurrent import futures

import grpc

out = sys.argv[1]


def request_id(context):
    return dict(context.invocation_metadata()).get("x-request-id", "none")


def write(name):
    with open(os.path.join(out, name), "w") as f:
        f.write(name + "\n")


def unary(request, context):
    write(request_id(context) + ".a")
    return b"ok"


def stream(request, context):
    rid = request_id(context)
    write(rid + ".a")
    for i in range(3):
        write(f"{rid}.s{i}")
        yield b"ok"


handler = grpc.method_handlers_generic_handler(
    "kr.Files",
    {"Unary": grpc.unary_unary_rpc_method_handler(unary), "Stream": grpc.unary_stream_rpc_method_handler(stream)},
)
server = grpc.server(futures.ThreadPoolExecutor(max_workers=16))
server.add_generic_rpc_handlers((handler,))
port = server.add_insecure_port("127.0.0.1:0")
server.start()
print(port, flush=True)
server.wait_for_termination()
