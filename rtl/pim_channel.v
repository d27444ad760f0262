// pimsat RTL model of one fpga-proto channel (issue 17): a behavioural reference, cycle by cycle.
//
//   instruction memory  imem/icyc: the bundle's program/<ch>.words.hex and .cycles.hex; the first
//                       word not loaded (x) or with opcode 0 ends the program
//   command decoder     fetches, decodes the ISA word (hwmodel/isa.yaml field layout), issues the
//                       instruction's commands: the first at its issue cycle (stamp; unstamped: the
//                       earliest cycle the timing counters allow), a sweep's others at the sweep
//                       spacing (gap, below), a MAC's no earlier than its global-buffer burst is ready
//   timing counters     last[cmd][unit]: the last issue of each command per bank, bank group, rank and
//                       channel; window rings (tFAW); the rows come from rtl/timing.hex, so every row
//                       of the resolved table is checked (same-bank rows, tRRD, tFAW, tCCD, turnarounds)
//   banks               mem: NB banks x ROWS x COLS bursts of 16 fp16 lanes, open row per bank
//   PIM units           NB / BPP units, NACC fp32 accumulators each; MAC = 16 fp16 products (exact in
//                       fp32), the balanced adder tree, fp32 accumulation (fp.vh)
//   global buffer       NGB bursts, written by WRGB from host memory; ready tGB after the write
//   host memory port    hmem (16-bit words in the PIM dtype) and syms ({base, size} per symbol):
//                       sources of WR and WRGB; RD and RDACC read-outs are logged in issue order
//   refresh             JEDEC, as the simulator: REF #j before (j + postponed) x tREFI and no earlier
//                       than its pulled-in credit, REFs at most max_refresh_interval x tREFI apart; at the
//                       program's end (its makespan T, from params) none owed
// Not modelled: SIG/WAIT (the host is the testbench; every command of a bundle is stamped), the
// host-side adds of RDACC values.
// A violation is counted and printed with its cycle, instruction and rule; execution goes on.
module pim_channel #(
    parameter NB = 4, ROWS = 64, COLS = 8, NACC = 8, NGB = 8, BPP = 2, NG = 2,
    parameter IMAX = 1 << 16, HOSTW = 1 << 16, NSYM = 256, MAXR = 128, LOGMAX = 1 << 16
) (
    input clk,
    output reg done
);
    `include "fp.vh"
    localparam E = 16, NU = NB + NG + 2, NPU = NB / BPP, WIN = 8;
    localparam ACT = 0, PRE = 1, RD = 2, WR = 3, REF = 4, MAC = 5, WRGB = 6, RDACC = 7;
    localparam signed [63:0] NEG = -(64'sd1 <<< 40);
    localparam [63:0] UNSTAMPED = {64{1'b1}};

    // ---- memories the testbench loads ($readmemh) and reads back ($writememh) ----
    reg [127:0] imem [0:IMAX-1];
    reg [63:0] icyc [0:IMAX-1];
    reg [255:0] mem [0:NB*ROWS*COLS-1];
    reg [15:0] hmem [0:HOSTW-1];
    reg [63:0] syms [0:NSYM-1];
    reg [63:0] trow [0:MAXR-1];      // {prev, next, scope, window, latency}
    reg [31:0] par [0:9+2*NB+5-1];   // completion[8], tGB, bank group and PIM unit of each bank, refresh (below)
    reg [119:0] cmdlog [0:LOGMAX-1];
    reg [31:0] rdacc_log [0:LOGMAX-1];
    reg [255:0] rd_log [0:LOGMAX-1];
    reg [63:0] summary [0:2];        // commands, last completion, violations
    integer ncmd, nrdacc, nrd, violations;
    reg signed [63:0] done_cycle;

    // ---- state ----
    reg signed [63:0] now, last_bus;
    reg signed [63:0] last [0:8*NU-1];
    reg signed [63:0] ring [0:MAXR*NU*WIN-1];
    integer rhead [0:MAXR*NU-1];
    integer openrow [0:NB-1];
    reg [255:0] gb [0:NGB-1];
    reg signed [63:0] gbready [0:NGB-1];
    reg [31:0] acc [0:NPU*NACC-1];
    integer gap [0:7];
    integer R;
    integer refs;                    // REFs issued
    reg signed [63:0] last_ref;      // cycle of the last (0: the start)

    // ---- the instruction in flight ----
    reg inflight;
    integer pc, c, k, n, mask, gmask, bank, row, col, gbi, ai, cnt, sym, stride, emask;
    reg [63:0] offset;
    reg signed [63:0] t_next;
    reg [127:0] w;

    integer i, j, b, r, u;

    initial begin
        done = 0; now = 0; last_bus = NEG; inflight = 0; pc = 0; refs = 0; last_ref = 0;
        ncmd = 0; nrdacc = 0; nrd = 0; violations = 0; done_cycle = 0;
        for (i = 0; i < NB*ROWS*COLS; i = i + 1) mem[i] = 0;
        for (i = 0; i < NSYM; i = i + 1) syms[i] = 0;
        for (i = 0; i < MAXR; i = i + 1) trow[i] = {64{1'b1}};
        for (i = 0; i < 8*NU; i = i + 1) last[i] = NEG;
        for (i = 0; i < MAXR*NU*WIN; i = i + 1) ring[i] = NEG;
        for (i = 0; i < MAXR*NU; i = i + 1) rhead[i] = 0;
        for (i = 0; i < NB; i = i + 1) openrow[i] = -1;
        for (i = 0; i < NGB; i = i + 1) begin gb[i] = 0; gbready[i] = NEG; end
        for (i = 0; i < NPU*NACC; i = i + 1) acc[i] = 0;
    end

    // after the testbench loaded trow: the row count and the sweep spacing of every command
    task setup;
        begin
            R = 0;
            while (R < MAXR && trow[R] != {64{1'b1}}) R = R + 1;
            for (i = 0; i < 8; i = i + 1) gap[i] = 1;
            for (r = 0; r < R; r = r + 1)
                if (trow[r][63:56] == trow[r][55:48] && trow[r][39:32] == 0 && trow[r][31:0] > gap[trow[r][63:56]])
                    gap[trow[r][63:56]] = trow[r][31:0];
        end
    endtask

    task violation(input [8*64-1:0] what, input signed [63:0] need, input signed [63:0] got);
        begin
            violations = violations + 1;
            $display("RTL VIOLATION cycle %0d instr %0d: %0s (needed %0d, at %0d)", now, pc, what, need, got);
        end
    endtask

    // unit u is touched by the current command in the row's scope
    function automatic touched(input integer scope, input integer u);
        begin
            case (scope)
                0: touched = (u < NB) && ((mask >> u) & 1);
                1: touched = (u >= NB) && (u < NB + NG) && ((gmask >> (u - NB)) & 1);
                2: touched = (u == NB + NG);
                default: touched = (u == NB + NG + 1);
            endcase
        end
    endfunction

    // earliest cycle every timing row next = c allows; `row_bad` the first binding row
    reg signed [63:0] req;
    integer row_bad;
    task requirement;
        reg signed [63:0] tp;
        integer p, sc, wn;
        begin
            req = NEG; row_bad = -1;
            for (r = 0; r < R; r = r + 1) if (trow[r][55:48] == c) begin
                p = trow[r][63:56]; sc = trow[r][47:40]; wn = trow[r][39:32];
                for (u = 0; u < NU; u = u + 1) if (touched(sc, u)) begin
                    tp = (wn == 0) ? last[p*NU + u] : ring[(r*NU + u)*WIN + rhead[r*NU + u]];
                    if (tp + $signed({32'd0, trow[r][31:0]}) > req) begin
                        req = tp + $signed({32'd0, trow[r][31:0]}); row_bad = r;
                    end
                end
            end
        end
    endtask

    task push(input signed [63:0] t);
        begin
            for (u = 0; u < NU; u = u + 1)
                if (touched(0, u) || touched(1, u) || touched(2, u) || touched(3, u)) last[c*NU + u] = t;
            for (r = 0; r < R; r = r + 1) if (trow[r][39:32] != 0 && trow[r][63:56] == c)
                for (u = 0; u < NU; u = u + 1) if (touched(trow[r][47:40], u)) begin
                    ring[(r*NU + u)*WIN + rhead[r*NU + u]] = t;
                    rhead[r*NU + u] = (rhead[r*NU + u] + 1) % trow[r][39:32];
                end
        end
    endtask

    function automatic [15:0] hread(input integer s, input [63:0] idx);
        begin
            hread = (idx < syms[s][31:0]) ? hmem[syms[s][63:32] + idx] : 16'd0;
        end
    endfunction

    function automatic self_window(input integer cc);
        integer q;
        begin
            self_window = 0;
            for (q = 0; q < R; q = q + 1)
                if (trow[q][63:56] == cc && trow[q][55:48] == cc && trow[q][39:32] != 0) self_window = 1;
        end
    endfunction

    // refresh parameters: par[9 + 2 NB ...] = tREFI, max postponed, max pulled in, max interval, makespan T
    function automatic signed [63:0] pv(input integer i);   // a parameter, signed
        pv = $signed({32'd0, par[i]});
    endfunction

    task refresh_issue;
        reg signed [63:0] trefi;
        begin
            trefi = pv(9 + 2*NB);
            if (now >= (refs + 1 + pv(10 + 2*NB)) * trefi)
                violation("REF later than its deadline (max_postponed_refresh)", (refs + 1 + pv(10 + 2*NB)) * trefi - 1, now);
            if (refs + 1 - now / trefi > pv(11 + 2*NB))
                violation("REF before its credit (max_pulled_in_refresh)", (refs + 1 - pv(11 + 2*NB)) * trefi, now);
            if (now - last_ref > pv(12 + 2*NB) * trefi)
                violation("REF too long after the previous (max_refresh_interval)", last_ref + pv(12 + 2*NB) * trefi, now);
            refs = refs + 1;
            last_ref = now;
        end
    endtask

    task refresh_end;
        reg signed [63:0] trefi, t_end;
        begin
            trefi = pv(9 + 2*NB); t_end = pv(13 + 2*NB);
            if ((refs + 1 + pv(10 + 2*NB)) * trefi <= t_end)
                violation("more than max_postponed_refresh REFs owed", (refs + 1 + pv(10 + 2*NB)) * trefi, t_end);
            else if (refs < t_end / trefi) violation("program ends owing refreshes", t_end / trefi, refs);
            if (t_end - last_ref > pv(12 + 2*NB) * trefi)
                violation("program ends too long after the last REF (max_refresh_interval)", last_ref + pv(12 + 2*NB) * trefi, t_end);
        end
    endtask

    `include "pim_decode.vh"
    `include "pim_issue.vh"

    always @(posedge clk) if (!done) begin
        if (!inflight) fetch;
        if (inflight && now == t_next) issue;
        now = now + 1;
    end
endmodule
