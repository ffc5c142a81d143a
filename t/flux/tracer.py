"""Write the messages of one broker module as JSON lines (run with ``flux python``).

Usage: flux python tracer.py MODULE OUTFILE

It makes the same ``module.trace`` streaming RPC as ``flux module trace
--full`` and writes each message as ``{"t", "dir", "type", "topic",
"errnum", "errstr"?, "payload"?}``.  Used by record_traffic.py.
"""

import json
import signal
import sys

import flux
import flux.constants

TYPES = {1: "request", 2: "response", 4: "event", 8: "control"}


def main():
    name, out = sys.argv[1], sys.argv[2]
    h = flux.Flux()
    f = h.rpc(
        "module.trace",
        {"typemask": 0xF, "topic_glob": "*", "names": [name], "full": True},
        flags=flux.constants.FLUX_RPC_STREAMING,
    )
    fp = open(out, "w", buffering=1)
    signal.signal(signal.SIGTERM, lambda *a: sys.exit(0))
    print("ready", flush=True)
    while True:
        m = f.get()
        rec = {
            "t": m["timestamp"],
            "dir": m["prefix"],
            "type": TYPES.get(m["type"], m["type"]),
            "topic": m["topic"],
            "errnum": m.get("errnum", 0),
        }
        if m.get("errstr"):
            rec["errstr"] = m["errstr"]
        if "payload" in m and m["payload"] is not None:
            rec["payload"] = m["payload"]
        fp.write(json.dumps(rec, sort_keys=True) + "\n")
        f.reset()


if __name__ == "__main__":
    main()
