#!/usr/bin/env python3
"""Instruction counts of the block loops of the neon-dotprod and neon-i8mm gemm kernels.

    make arm64 && python3 tools/neon_insn_counts.py [build-arm64]

Reads `aarch64-linux-gnu-objdump -d` of matmul_neon_dotprod.o and matmul_neon_i8mm.o and, per weight
type, finds the innermost loop that holds one block's products: 64 SDOT (K-quants) or 8 (32-element
formats) for dotprod's tile of 1 weight row x 4 activation rows, 128 SMMLA or 16 for i8mm's tile of
2 weight rows x 8 activation rows. A loop nested in it (GCC keeps one for the tile scales of the
16-element sub-blocks) counts 4 times, its trip count. Also the activation packing loop of i8mm (one
block of one activation pair, shared by the 8 weight-row pairs of a group). Prints the markdown
table of docs/kernels.md, per block and per 2 x 2 tile of outputs (dotprod's loop is one tile's
worth: 4 outputs; i8mm's is 4 tiles, and a quarter of a packing serves one tile). Static counts:
what the core has to issue, not a timing.
"""
import collections
import re
import subprocess
import sys


def functions(obj):
    out = subprocess.run(["aarch64-linux-gnu-objdump", "-d", "--no-show-raw-insn", obj],
                         capture_output=True, text=True, check=True).stdout
    funcs, cur = collections.defaultdict(list), None
    for line in out.split("\n"):
        m = re.match(r"^([0-9a-f]+) <(.+)>:$", line)
        if m:
            cur = m.group(2)
            continue
        m = re.match(r"^\s+([0-9a-f]+):\s+(\S+)\s*(.*)$", line)
        if m and cur:
            funcs[cur].append((int(m.group(1), 16), m.group(2), m.group(3)))
    return funcs


def loops(insns):
    """(first, last) instruction indexes of every backward branch's loop."""
    at = {a: i for i, (a, _, _) in enumerate(insns)}
    found = []
    for i, (a, op, args) in enumerate(insns):
        if op in ("b", "cbz", "cbnz", "tbz", "tbnz") or op.startswith("b."):
            m = re.search(r"\b([0-9a-f]+) <", args)
            if m and int(m.group(1), 16) <= a and int(m.group(1), 16) in at:
                found.append((at[int(m.group(1), 16)], i))
    return found


def kind(op, args):
    if op in ("smmla", "sdot"):
        return "mm"
    if op.startswith("ld"):
        return "load"
    if op.startswith("st"):
        return "store"
    if re.search(r"\bv\d+\.", args) or re.match(r"^[qdsh]\d+", args):
        return "vector"  # the SIMD pipes' other work: unpacking, zips, moves, scales, f32
    return "scalar"


def count(insns, loop, trips=4):
    first, last = loop
    c = collections.Counter(kind(op, args) for _, op, args in insns[first:last + 1])
    for inner in loops(insns):
        if first <= inner[0] and inner[1] <= last and inner != loop:
            for _, op, args in insns[inner[0]:inner[1] + 1]:
                c[kind(op, args)] += trips - 1
    return c


def innermost(insns, pred):
    return min((lp for lp in loops(insns) if pred(insns[lp[0]:lp[1] + 1])), key=lambda lp: lp[1] - lp[0])


def n_op(body, name):
    return sum(1 for _, op, _ in body if op == name)


def main():
    build = sys.argv[1] if len(sys.argv) > 1 else "build-arm64"
    dot = functions(build + "/kernels/cpu/matmul_neon_dotprod.o")
    mm = functions(build + "/kernels/cpu/matmul_neon_i8mm.o")
    print("| type | dotprod loop, 1 x 4 (one tile): insns, SIMD ops (SDOT) | i8mm loop, 2 x 8 (4 tiles): insns, "
          "SIMD ops (SMMLA) | i8mm packing, one pair: insns, SIMD ops | i8mm per tile | SIMD ops per tile, "
          "dotprod / i8mm |")
    print("|---|--:|--:|--:|--:|--:|")
    for t in ["q4_k", "q6_k", "q5_0", "q8_0", "q4_0", "q4_1", "q5_1", "q2_k", "q3_k", "q5_k"]:
        k_quant = t.endswith("_k")
        d_fn, m_fn = dot["gemm_" + t], mm["mm_" + t]
        d = count(d_fn, innermost(d_fn, lambda b: n_op(b, "sdot") == (64 if k_quant else 8)))
        m = count(m_fn, innermost(m_fn, lambda b: n_op(b, "smmla") == (128 if k_quant else 16)))
        p = count(m_fn, innermost(m_fn, lambda b: n_op(b, "st2") > 0 and n_op(b, "smmla") == 0), 1)
        d_all, m_all, p_all = sum(d.values()), sum(m.values()), sum(p.values())
        d_simd, m_simd, p_simd = d["mm"] + d["vector"], m["mm"] + m["vector"], p["vector"]
        # 2 x 2 tiles per loop: 1 (dotprod), 4 (i8mm); a packed pair serves 8 weight-row pairs
        m_tile = (m_all / 4 + p_all / 8, m_simd / 4 + p_simd / 8)
        print(f"| {t.upper()} | {d_all}, {d_simd} ({d['mm']}) | {m_all}, {m_simd} ({m['mm']}) | {p_all}, {p_simd} "
              f"| {m_tile[0]:.1f}, {m_tile[1]:.1f} | {d_simd / m_tile[1]:.2f} |")


if __name__ == "__main__":
    main()
