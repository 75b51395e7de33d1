#!/usr/bin/env python3
"""Run one moto server process on 127.0.0.1 for the fleetbucket local stack.

This is moto's own `moto_server` entry point (moto/server.py, moto 5) reduced
to what the local stack needs, plus a switch for the serving model:

  --single-threaded  one request at a time. Use it for DynamoDB: moto's
                     threaded server is not atomic and double-spends
                     conditional writes under concurrency.
  --threaded         one thread per request. Use it for SQS: long polling
                     (ReceiveMessage WaitTimeSeconds > 0) blocks a request,
                     which would stall a single-threaded server.

The WSGI app is built exactly as moto builds it:
DomainDispatcherApplication(create_backend_app). The server is built with
werkzeug.serving.make_server, which is what run_simple(host, port, app,
threaded=...) does internally without the reloader/debugger; using it directly
lets us bind port 0 (a free port picked by the kernel, no race) and report the
bound port through --port-file once the socket is listening.

Exit status: 0 on SIGTERM/SIGINT, 2 if the port cannot be bound.
"""

import argparse
import errno
import logging
import os
import signal
import sys


def close_inherited_fds():
    """Close descriptors inherited from the caller beyond stdio (a lock file,
    a CI runner's pipe, ...): a long-lived server holding them would keep a
    lock held or a pipe reader waiting. Python opens its own descriptors
    non-inheritable (PEP 446), so every inheritable one came from the caller."""
    try:
        fds = [int(fd) for fd in os.listdir("/proc/self/fd")]
    except OSError:
        fds = range(3, 1024)
    for fd in fds:
        if fd <= 2:
            continue
        try:
            if os.get_inheritable(fd):
                os.close(fd)
        except OSError:
            pass


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--host", default="127.0.0.1",
                        help="address to bind (default 127.0.0.1; keep it local)")
    parser.add_argument("--port", type=int, required=True,
                        help="port to bind; 0 lets the kernel pick a free one")
    mode = parser.add_mutually_exclusive_group(required=True)
    mode.add_argument("--single-threaded", dest="threaded", action="store_false",
                      help="serve one request at a time (DynamoDB)")
    mode.add_argument("--threaded", dest="threaded", action="store_true",
                      help="serve each request on its own thread (SQS)")
    parser.add_argument("--port-file",
                        help="write the bound port here once listening")
    parser.add_argument("--log-requests", action="store_true",
                        help="log one line per request (off by default: it costs "
                             "throughput on the single-threaded server)")
    parser.add_argument("--no-setsid", action="store_true",
                        help="stay in the caller's session (default: start a new "
                             "session so a Ctrl-C in the caller's terminal or a "
                             "closed terminal does not kill the server)")
    args = parser.parse_args(argv)

    if not args.no_setsid:
        try:
            os.setsid()
        except OSError:
            pass  # already a session/process-group leader
    close_inherited_fds()

    def on_signal(signum, frame):
        sys.exit(0)

    signal.signal(signal.SIGTERM, on_signal)
    signal.signal(signal.SIGINT, on_signal)
    signal.signal(signal.SIGHUP, signal.SIG_IGN)

    # Imported after argument parsing so --help is instant (moto takes ~1 s).
    from werkzeug.serving import make_server
    from moto.moto_server.werkzeug_app import (
        DomainDispatcherApplication,
        create_backend_app,
    )

    if not args.log_requests:
        logging.getLogger("werkzeug").setLevel(logging.WARNING)

    app = DomainDispatcherApplication(create_backend_app)
    app.debug = True  # as moto.server.main does: tracebacks in the log

    try:
        # make_server prints the errno text and calls sys.exit(1) itself when
        # the bind fails; turn that into a clear message naming the port.
        server = make_server(args.host, args.port, app, threaded=args.threaded)
    except SystemExit:
        print(f"moto_server.py: cannot listen on {args.host}:{args.port} "
              f"(port in use or not permitted)", file=sys.stderr, flush=True)
        sys.exit(2)
    except OSError as e:
        msg = "port in use" if e.errno == errno.EADDRINUSE else e.strerror
        print(f"moto_server.py: cannot listen on {args.host}:{args.port}: {msg}",
              file=sys.stderr, flush=True)
        sys.exit(2)

    port = server.server_port
    # moto.server.main exports MOTO_PORT; some backends build URLs from it.
    os.environ["MOTO_PORT"] = str(port)

    if args.port_file:
        tmp = f"{args.port_file}.tmp.{os.getpid()}"
        with open(tmp, "w") as f:
            f.write(f"{port}\n")
        os.replace(tmp, args.port_file)

    kind = "threaded" if args.threaded else "single-threaded"
    print(f"moto_server.py: pid {os.getpid()} serving moto ({kind}) on "
          f"http://{args.host}:{port}", file=sys.stderr, flush=True)
    try:
        server.serve_forever()
    finally:
        server.server_close()


if __name__ == "__main__":
    main()
