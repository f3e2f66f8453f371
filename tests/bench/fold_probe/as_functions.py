#!/usr/bin/env python3
"""fold probe: the library's own scripts as one Redis 7 function library, for measurement only
(tests/bench/fold_probe.sh); the library does not load it.

An EVAL script builds every function it defines again on each run. A function library builds
them once, at FUNCTION LOAD: what that would save is what this measures, with the scripts'
code unchanged. The shared parts (common.lua, slots.lua, queue.lua) become the library's
top level; their per-call state (the keys, the limit, the slot counts) becomes library locals
that each call sets again first (a call runs alone, so no call sees another's). Each
operation's file becomes the body of function fairsem_probe_<op>, which FCALL runs with the
same keys and arguments as EVALSHA.

  as_functions.py SRC_DIR OP... > library.lua     (SRC_DIR: src/lua/semaphore)
"""
import re
import sys

SHARED = ("common.lua", "slots.lua", "queue.lua")
# A top-level local of the shared parts that is not a function: `local a, b = expr` or
# `local a, b`, on one line (the parts have no other kind).
STATE = re.compile(r"^local (?!function\b)([\w, ]+?)(?: = (.*))?$")


def main():
    src, ops = sys.argv[1], sys.argv[2:]
    top, setup = ["#!lua name=fairsem_probe", "local KEYS, ARGV"], []
    for part in SHARED:
        with open(f"{src}/{part}") as f:
            for line in f.read().split("\n"):
                m = STATE.match(line)
                if not m:
                    top.append(line)
                    continue
                names, value = m.group(1), m.group(2)
                top.append(f"local {names}")
                setup.append(f"  {names} = {value if value is not None else 'nil'}")
    top.append("local function begin(keys, args)")
    top.append("  KEYS, ARGV = keys, args")
    top.extend(setup)
    top.append("end")
    for op in ops:
        with open(f"{src}/{op}.lua") as f:
            body = f.read()
        top.append(f"redis.register_function('fairsem_probe_{op}', function(keys, args)")
        top.append("begin(keys, args)")
        top.append(body)
        top.append("end)")
    print("\n".join(top))


if __name__ == "__main__":
    main()
