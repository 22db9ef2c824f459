#!/usr/bin/env python3
"""Static SASS instruction counts of the ladder kernels: does each step do what
it says?

Disassembles libattn_c.so with cuobjdump, takes each ladder candidate's
bf16 kernel (even lengths, no mask: the variant the ladder table times),
finds its main loop (the longest backward branch) and counts, in the loop
and in the whole kernel, the instruction classes the steps target:
IADD3/LOP3/SHF (step 8), IMAD.MOV/MOV (step 9), CS2R (step 10), LDL/STL
(spills), HMMA, LDSM, LDGSTS, STS, STG, MUFU.EX2, FFMA, BAR.

  python3 bench/sass_counts.py --lib build/kernels/libattn_c.so --out /tmp/sass
needs cuobjdump and c++filt on the PATH (a CUDA toolkit and binutils).
"""
import argparse
import collections
import json
import os
import re
import subprocess

CLASSES = ["IADD3", "LOP3", "SHF", "IMAD", "IMAD.MOV", "MOV", "CS2R", "LDL", "STL", "HMMA",
           "LDSM", "LDGSTS", "STS", "STG", "MUFU.EX2", "FFMA", "BAR"]
INSTR = re.compile(r"/\*([0-9a-f]{4,})\*/\s+(?:@!?U?P\w+\s+)?([A-Z][A-Z0-9_.]*)([^;]*);")
TABLE = os.path.join(os.path.dirname(__file__), "..", "kernels", "ladder", "ladder_table.inc")


def table_candidates():
    """(name, step, config) of every ATTN_KERNEL line of ladder_table.inc."""
    rows = []
    for line in open(TABLE):
        m = re.match(r'ATTN_KERNEL\("([^"]+)", *(\d+), *[a-z0-9_]+, *([^,]+),', line)
        if m:
            rows.append((m.group(1), int(m.group(2)), m.group(3).strip()))
    return rows


def functions(sass):
    """{mangled name: [(address, opcode, operands)]} from cuobjdump -sass output."""
    out, current = {}, None
    for line in sass.splitlines():
        m = re.match(r"\s*Function : (\S+)", line)
        if m:
            # A kernel instantiated in two translation units appears twice
            # (step 16's fallback is step 15's kernel): keep the first copy.
            current = [] if m.group(1) in out else out.setdefault(m.group(1), [])
            continue
        m = INSTR.search(line)
        if m and current is not None:
            current.append((int(m.group(1), 16), m.group(2), m.group(3)))
    return out


def classify(opcode):
    if opcode.startswith("IMAD.MOV"):
        return "IMAD.MOV"
    if opcode.startswith("MUFU.EX2"):
        return "MUFU.EX2"
    base = opcode.split(".")[0]
    return base if base in CLASSES else None


def counts(instrs):
    c = collections.Counter()
    for _, op, _ in instrs:
        k = classify(op)
        if k:
            c[k] += 1
    c["total"] = len(instrs)
    return c


def main_loop(instrs):
    """The instructions of the longest backward-branch span."""
    best = (0, 0)
    for addr, op, args in instrs:
        if op.startswith("BRA"):
            m = re.search(r"0x([0-9a-f]+)", args)
            if m and int(m.group(1), 16) < addr:
                target = int(m.group(1), 16)
                if addr - target > best[1] - best[0]:
                    best = (target, addr)
    return [i for i in instrs if best[0] <= i[0] <= best[1]]


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--lib", required=True)
    parser.add_argument("--out", default=".")
    args = parser.parse_args()
    sass = subprocess.check_output(["cuobjdump", "-sass", args.lib], text=True)
    funcs = functions(sass)
    names = list(funcs)
    demangled = subprocess.check_output(["c++filt"], input="\n".join(names), text=True).split("\n")
    by_config = {}
    for mangled, pretty in zip(names, demangled):
        m = re.search(r"FlashFwdKernel<(.*), __nv_bfloat16, true, false>", pretty)
        if m:
            by_config[m.group(1).replace("attn::fa2::", "").replace(" ", "")] = funcs[mangled]
    results = {}
    lines = ["| kernel | step | loop: " + " | ".join(CLASSES) + " | loop total | kernel total |",
             "|---|---|" + "---|" * (len(CLASSES) + 2)]
    for name, step, config in table_candidates():
        instrs = by_config.get(config.replace(" ", ""))
        if instrs is None:
            lines.append(f"| {name} | {step} | not found |")
            continue
        loop, whole = counts(main_loop(instrs)), counts(instrs)
        results[name] = {"step": step, "config": config, "loop": loop, "kernel": whole}
        lines.append(f"| {name} | {step} | " + " | ".join(str(loop[c]) for c in CLASSES) +
                     f" | {loop['total']} | {whole['total']} |")
    table = "\n".join(lines)
    print(table)
    os.makedirs(args.out, exist_ok=True)
    with open(os.path.join(args.out, "sass_counts.md"), "w") as f:
        f.write(table + "\n")
    with open(os.path.join(args.out, "sass_counts.json"), "w") as f:
        json.dump(results, f, indent=1)


if __name__ == "__main__":
    main()
