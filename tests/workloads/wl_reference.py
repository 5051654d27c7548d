#!/usr/bin/env python3
"""wl_reference.py: an independent model of the workloads (what their graphs
compute, written from the descriptions in wl_common.h and each workload's
header), used by test_workloads.sh to check that the programs on the emulated
driver produce the right numbers, not merely stable ones.

Usage: wl_reference.py WORKLOAD STEPS NODES ELEMS   -> prints the checksum hex.
Meant for small sizes (pure Python)."""
import struct
import sys

M = 0xFFFFFFFF


def h32(x):
    x &= M
    x ^= x >> 16; x = (x * 0x85EBCA6B) & M
    x ^= x >> 13; x = (x * 0xC2B2AE35) & M
    x ^= x >> 16
    return x


def rotl(x, r):
    return ((x << r) | (x >> (32 - r))) & M


def f32(v):
    return struct.unpack('<f', struct.pack('<f', v))[0]


def fbits(v):
    return struct.unpack('<I', struct.pack('<f', v))[0]


def fill(n, seed):
    return [h32(seed * 0x27D4EB2F + i) for i in range(n)]


class Chain:
    """The kernel chain of wl_common.h on a flat memory of 32-bit words."""

    def __init__(self, nodes, elems):
        self.nodes, self.n = nodes, elems
        self.nl = min(4, nodes - 1)

    def run(self, mem, inp, prev, out, lanes, salt):
        n, nl = self.n, self.nl
        for j in range(nl):
            s = (salt + j * 0x01000193) & M
            v = [h32(mem[inp + e] + s + e * 0x9E3779B9) ^ mem[prev + e] for e in range(n)]
            mem[lanes[j]:lanes[j] + n] = v
        for i in range(nl, self.nodes - 1):
            x, y = lanes[(i - 1) % nl], lanes[i % nl]
            if i % 2:
                k = (i * 0x3C6EF372) & M
                v = [(rotl(mem[y + e] ^ ((mem[x + e] * 0x9E3779B1) & M), 13) + k) & M for e in range(n)]
            else:
                a, b = 0.75, float(i % 97) + 0.5
                v = []
                for e in range(n):
                    xv = mem[x + e]
                    r = f32(f32(a * float(xv & 0xFFFFFF)) + b)
                    v.append(fbits(r) ^ xv ^ mem[y + e])
            mem[y:y + n] = v
        last = lanes[(self.nodes - 2) % nl] if self.nodes - 1 > nl else lanes[nl - 1]
        x = mem[last:last + n]
        mem[out:out + n] = [x[e] ^ rotl(x[(e + 1) % n], 7) ^ (x[(e + n - 1) % n] >> 3) for e in range(n)]


def mix(mem, x, y, n, k):
    mem[y:y + n] = [(rotl(mem[y + e] ^ ((mem[x + e] * 0x9E3779B1) & M), 13) + k) & M for e in range(n)]


def fnv(words):
    h = 0xCBF29CE484222325
    for b in struct.pack('<%dI' % len(words), *words):
        h = ((h ^ b) * 0x100000001B3) & 0xFFFFFFFFFFFFFFFF
    return h


def model(name, steps, nodes, n):
    c = Chain(nodes, n)
    salt = 0x5EED
    mem = []  # a flat memory of 32-bit words; buffers are word offsets into it

    def buf(seed, words=n):
        off = len(mem)
        mem.extend(fill(words, seed))
        return off

    if name in ('recapture_temps', 'scalar_changes', 'topology_changes'):
        inp, out = buf(1), buf(2)
        lanes = [buf(0x1A9E0000 + j) for j in range(c.nl)]  # temps: always written before read
        aux = buf(4)
        for s in range(steps):
            if name == 'scalar_changes':
                salt = (0x5EED + s * 0x9E3779B9) & M
            if name == 'topology_changes' and s % 4 == 3 and (s // 4) % 2:
                mix(mem, inp, aux, n, 0xF0F0)  # forked node: reads only the untouched input
            c.run(mem, inp, out, out, lanes, salt)
            if name == 'topology_changes' and s % 4 == 3 and not (s // 4) % 2:
                mix(mem, lanes[0], aux, n, 0xE0E0)
        regions = [out, aux] if name == 'topology_changes' else [out]
    elif name in ('rotating_inputs', 'fresh_inputs'):
        out = buf(2)
        ins = [buf(10 + i) for i in range(3)]
        lanes = [buf(0x1A9E0000 + j) for j in range(c.nl)]
        for s in range(steps):
            inp = ins[s % 3] if name == 'rotating_inputs' else buf(100 + s)
            c.run(mem, inp, out, out, lanes, salt)
        regions = [out]
    elif name == 'slices':
        base = buf(3, 8 * n)
        slot = lambda i: base + (i % 7) * n
        out = base + 7 * n
        half = n // 2
        for s in range(steps):
            r = s % 7
            dst = slot(r + 5) + half
            mem[dst:dst + n - half] = [0xA5A5F00D] * (n - half)
            c.run(mem, slot(r), out, out, [slot(r + 1 + j) for j in range(c.nl)], salt)
            mem[slot(r + 6):slot(r + 6) + n] = mem[out:out + n]
        return '%016x' % fnv(mem[base:base + 8 * n])
    else:
        raise SystemExit('unknown workload ' + name)
    words = []
    for r in regions:
        words += mem[r:r + n]
    return '%016x' % fnv(words)


if __name__ == '__main__':
    if len(sys.argv) != 5:
        raise SystemExit(__doc__)
    print(model(sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), int(sys.argv[4])))
