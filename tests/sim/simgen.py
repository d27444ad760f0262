"""Hand-written stream generators for the simulator tests: a tiny GEMV compiler.

Layout (row-split, one weight row per PIM unit slot): output row j goes to slot s = j mod (C*P)
(channel s // P, unit s % P) and accumulator row a = (j // (C*P)) within a pass of C*P*floor(A/B)
rows. Weight row j is cut into chunks of `kc` bursts (kc = min(columns, global-buffer bursts));
chunk kk of row j lies at DRAM row rowbase(a) + kk, column 0, in bank unit*bpp + a % bpp.
Per chunk and batch element: WRGB the input chunk, then per accumulator row ACT / MAC / PRE on
the banks of every unit that has such a row. After a pass: RDACC per unit into the staging
tensor, strided by C*P. A REF every `ref_every` ACT groups. Each channel ends with SIG id=c; the
host waits for every channel and runs the epilogue.
"""

from __future__ import annotations

from hwmodel.isa import make
from hwmodel.streams import Placement, StreamSet
from ir.program import Op, Program
from ir.types import Role, Tensor

PRESETS = ("hbm2-pim", "gddr6-aim", "hbm3-pim", "fpga-proto")
# Hand-written multi-channel programs here run their channels in lockstep, the same command in
# the same cycle on every channel: illegal where two pseudo-channels share a command bus
# (hbm2-pim, hbm3-pim: organization.command_bus = shared_pair; tests/sim/test_shared_bus.py).
# The tests of the simulator's other rules run them with a command bus per channel.
LOCKSTEP = "organization.command_bus=per_channel"


def norm_gemv_program(dtype, rows: int, name: str = "norm_gemv") -> Program:
    """rmsnorm on the host, then a gemv of `rows` x 64 in memory: a host op feeding a PIM op."""
    ts = [
        Tensor(name="h", shape=(1, 64), dtype=dtype, role=Role.activation),
        Tensor(name="norm.weight", shape=(64,), dtype=dtype, role=Role.weight),
        Tensor(name="x", shape=(1, 64), dtype=dtype, role=Role.activation),
        Tensor(name="gemv.weight", shape=(rows, 64), dtype=dtype, role=Role.weight),
        Tensor(name="gemv.out", shape=(1, rows), dtype=dtype, role=Role.activation),
    ]
    ops = [
        Op(name="norm", kind="rmsnorm", inputs=["h", "norm.weight"], outputs=["x"]),
        Op(name="gemv", kind="gemv", inputs=["x", "gemv.weight"], outputs=["gemv.out"]),
    ]
    return Program(name=name, tensors=ts, ops=ops, inputs=["h"], outputs=["gemv.out"])


def streams(hw, *channels, host=(), symbols=(), placements=()) -> StreamSet:
    """A StreamSet from plain instruction lists."""
    return StreamSet(hw.name, hw.isa_version, list(symbols), [list(c) for c in channels], list(host), list(placements))


def compile_gemv(
    hw, program, channels: int | None = None, ref_every: int = 16, host_first: list | None = None
) -> StreamSet:
    op = program.ops[-1] if host_first else program.ops[0]
    op_index = program.ops.index(op)
    xname, wname = op.inputs[0], op.inputs[1]
    has_bias = len(op.inputs) == 3
    out = op.outputs[0]
    B, K = program.tensors[xname].shape
    N = program.tensors[wname].shape[0]
    E, P, bpp = hw.elements_per_burst, hw.pus_per_channel, hw.pim.banks_per_pu
    A = hw.pim.acc_registers
    C = channels or hw.organization.channels
    assert K % E == 0, "test generator needs K to be a multiple of the burst"
    kc = min(hw.organization.columns, hw.gb_bursts)
    kb = K // E
    nchunks = -(-kb // kc)
    arows = A // B
    assert arows >= 1
    rows_pass = C * P * arows
    npass = -(-N // rows_pass)
    rows_per_pass_bank = -(-arows // bpp) * nchunks
    assert npass * rows_per_pass_bank <= hw.organization.rows, "weights do not fit this test layout"
    symbols = [xname, out + "#acc"] + ([op.inputs[2]] if has_bias else [])
    X, STG = 0, 1
    placements = []
    chans: list[list] = [[] for _ in range(C)]
    groups = [0] * C

    def where(j):
        q, r = divmod(j, rows_pass)
        a, s = divmod(r, C * P)
        c, p = divmod(s, P)
        return q, a, c, p

    def rowbase(q, a):
        return q * rows_per_pass_bank + (a // bpp) * nchunks

    for j in range(N):
        q, a, c, p = where(j)
        bank = p * bpp + a % bpp
        for kk in range(nchunks):
            nb = min(kc, kb - kk * kc)
            placements.append(Placement(wname, c, bank, rowbase(q, a) + kk, 0, j * K + kk * kc * E, nb * E))
    wait_host = []
    if host_first:
        wait_host = [make("WAIT", id=1000)]
    for c in range(C):
        chans[c].extend(wait_host)
    for q in range(npass):
        for c in range(C):
            s = chans[c]
            # rows of this pass in this channel: (a, p) -> j
            present = {}
            for a in range(arows):
                for p in range(P):
                    j = q * rows_pass + a * C * P + c * P + p
                    if j < N:
                        present.setdefault(a, []).append(p)
            if not present:
                continue
            for kk in range(nchunks):
                nb = min(kc, kb - kk * kc)
                for b in range(B):
                    s.append(make("WRGB", gb=0, count=nb, src=X, offset=b * K + kk * kc * E))
                    for a, units in present.items():
                        mask = sum(1 << (p * bpp + a % bpp) for p in units)
                        s.append(make("ACT", mask=mask, row=rowbase(q, a) + kk))
                        s.append(make("MAC", mask=mask, col=0, count=nb, gb=0, acc=b * arows + a))
                        s.append(make("PRE", mask=mask))
                        groups[c] += 1
                        if groups[c] % ref_every == 0:
                            s.append(make("REF"))
            for p in range(P):
                n_a = sum(1 for a in present if p in present[a])
                if n_a == 0:
                    continue
                for b in range(B):
                    s.append(
                        make(
                            "RDACC",
                            bank=p * bpp,
                            acc=b * arows,
                            count=n_a,
                            dst=STG,
                            offset=b * N + q * rows_pass + c * P + p,
                            stride=C * P,
                        )
                    )
    for c in range(C):
        chans[c].append(make("REF"))
        chans[c].append(make("SIG", id=c))
    host = []
    if host_first:
        for k in host_first:
            host.append(make("HOP", op=k))
        host.append(make("SIG", id=1000))
    host += [make("WAIT", id=c) for c in range(C)] + [make("EPI", op=op_index)]
    return StreamSet(hw.name, hw.isa_version, symbols, chans, host, placements)


def compile_attention(hw, program) -> StreamSet:
    """attention_program(heads, kv_heads, head_dim=E, context=L-1, batch 1) with L = E positions on
    channel 0: K cache in bank 0 (position l at column l), V cache transposed in bank `bpp` (row d of
    V^T at column d, one burst of L positions). k / v of the new token are written by WR (v one
    element per burst, by emask). Scores and context by single-bank MACs (count 1, accumulator
    l mod A), RDACC every A outputs; epilogues and softmax on the host."""
    meta = program.meta
    H, G, D, pos = meta["heads"], meta["kv_heads"], meta["head_dim"], meta["position"]
    L = pos + 1
    E, A, bpp = hw.elements_per_burst, hw.pim.acc_registers, hw.pim.banks_per_pu
    assert D == E and L == E and G == 1 and program.meta["batch"] == 1
    ops = {op.name: i for i, op in enumerate(program.ops)}
    sym = ["q", "k", "v", "scores.out#acc", "softmax.out", "context.out#acc"]
    Q, KN, VN, SC, PR, CX = range(6)
    kb, vb = 0, bpp
    placements = [
        Placement("k_cache", 0, kb, 0, 0, 0, L * D),
        *[Placement("v_cache", 0, vb, 0, d, d, 1, count=L, stride=D) for d in range(D)],
    ]
    s = [
        make("ACT", mask=(1 << kb) | (1 << vb), row=0),
        make("WR", bank=kb, col=pos, count=1, src=KN, offset=0, emask=0xFFFF),
    ]
    s += [make("WR", bank=vb, col=d, count=1, src=VN, offset=d, emask=1 << (pos % E)) for d in range(D)]

    def per_head(bank, n, src, src_len, dst):
        """Per head: broadcast one burst of `src`, n single-column MACs, read out every A."""
        for h in range(H):
            s.append(make("WRGB", gb=0, count=1, src=src, offset=h * src_len))
            for i in range(n):
                s.append(make("MAC", mask=1 << bank, col=i, count=1, gb=0, acc=i % A))
                if i % A == A - 1 or i == n - 1:
                    base = i - i % A
                    s.append(
                        make("RDACC", bank=bank, acc=0, count=i - base + 1, dst=dst, offset=h * n + base, stride=1)
                    )

    per_head(kb, L, Q, D, SC)
    s += [make("SIG", id=0), make("WAIT", id=1)]
    per_head(vb, D, PR, L, CX)
    s += [make("PRE", mask=(1 << kb) | (1 << vb)), make("REF"), make("SIG", id=2)]
    host = [
        make("WAIT", id=0),
        make("EPI", op=ops["scores"]),
        make("HOP", op=ops["softmax"]),
        make("SIG", id=1),
        make("WAIT", id=2),
        make("EPI", op=ops["context"]),
    ]
    return StreamSet(
        hw.name, hw.isa_version, sym, [s] + [[] for _ in range(hw.organization.channels - 1)], host, placements
    )
