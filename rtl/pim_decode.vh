// pimsat RTL model: the command decoder (included in pim_channel). Fetches the next instruction,
// decodes its fields (isa_fields.vh, generated from the ISA table), checks its static ranges and
// the banks' state, and schedules its first command: at the stamp, checked against the timing
// counters; unstamped, at the earliest cycle they allow. SIG/WAIT and host instructions are skipped.
`include "isa_fields.vh"

function automatic integer lowest(input integer m);
    integer q;
    begin
        lowest = -1;
        for (q = NB - 1; q >= 0; q = q - 1) if ((m >> q) & 1) lowest = q;
    end
endfunction

task decode;
    reg [7:0] op;
    begin
        op = w[7:0];
        bank = -1; row = -1; col = 0; gbi = 0; ai = 0; cnt = 1; sym = 0; stride = 0; emask = 16'hffff; offset = 0;
        case (op)
            OPC_ACT: begin c = ACT; mask = w[F_ACT_MASK_LO +: F_ACT_MASK_W]; row = w[F_ACT_ROW_LO +: F_ACT_ROW_W]; end
            OPC_PRE: begin c = PRE; mask = w[F_PRE_MASK_LO +: F_PRE_MASK_W]; end
            OPC_REF: begin c = REF; mask = (1 << NB) - 1; end
            OPC_RD: begin
                c = RD; bank = w[F_RD_BANK_LO +: F_RD_BANK_W]; col = w[F_RD_COL_LO +: F_RD_COL_W];
                cnt = w[F_RD_COUNT_LO +: F_RD_COUNT_W]; sym = w[F_RD_DST_LO +: F_RD_DST_W];
                offset = w[F_RD_OFFSET_LO +: F_RD_OFFSET_W];
            end
            OPC_WR: begin
                c = WR; bank = w[F_WR_BANK_LO +: F_WR_BANK_W]; col = w[F_WR_COL_LO +: F_WR_COL_W];
                cnt = w[F_WR_COUNT_LO +: F_WR_COUNT_W]; sym = w[F_WR_SRC_LO +: F_WR_SRC_W];
                offset = w[F_WR_OFFSET_LO +: F_WR_OFFSET_W]; emask = w[F_WR_EMASK_LO +: F_WR_EMASK_W];
            end
            OPC_MAC: begin
                c = MAC; mask = w[F_MAC_MASK_LO +: F_MAC_MASK_W]; col = w[F_MAC_COL_LO +: F_MAC_COL_W];
                cnt = w[F_MAC_COUNT_LO +: F_MAC_COUNT_W]; gbi = w[F_MAC_GB_LO +: F_MAC_GB_W];
                ai = w[F_MAC_ACC_LO +: F_MAC_ACC_W];
            end
            OPC_WRGB: begin
                c = WRGB; mask = 0; gbi = w[F_WRGB_GB_LO +: F_WRGB_GB_W]; cnt = w[F_WRGB_COUNT_LO +: F_WRGB_COUNT_W];
                sym = w[F_WRGB_SRC_LO +: F_WRGB_SRC_W]; offset = w[F_WRGB_OFFSET_LO +: F_WRGB_OFFSET_W];
            end
            OPC_RDACC: begin
                c = RDACC; bank = w[F_RDACC_BANK_LO +: F_RDACC_BANK_W]; ai = w[F_RDACC_ACC_LO +: F_RDACC_ACC_W];
                cnt = w[F_RDACC_COUNT_LO +: F_RDACC_COUNT_W]; sym = w[F_RDACC_DST_LO +: F_RDACC_DST_W];
                offset = w[F_RDACC_OFFSET_LO +: F_RDACC_OFFSET_W]; stride = w[F_RDACC_STRIDE_LO +: F_RDACC_STRIDE_W];
            end
            default: c = -1;                                       // SIG, WAIT, HOP, EPI, HMV: no command
        endcase
        if (bank >= 0) mask = (bank < NB) ? (1 << bank) : 0;
        n = (c == RDACC) ? (4 * cnt + 31) / 32 : (c == RD || c == WR || c == MAC || c == WRGB) ? cnt : 1;
        gmask = 0;
        if (c == WRGB) gmask = (1 << NG) - 1;
        else for (b = 0; b < NB; b = b + 1) if ((mask >> b) & 1) gmask = gmask | (1 << par[9 + b]);
    end
endtask

task check_static;
    integer pus;
    begin
        if (c != WRGB && (mask == 0 || (mask >> NB) != 0)) violation("bank or mask out of range", NB, mask);
        if (n < 1 || cnt < 1) violation("count must be >= 1", 1, cnt);
        if (c == ACT && row >= ROWS) violation("row out of range", ROWS, row);
        if ((c == RD || c == WR || c == MAC) && col + n > COLS) violation("column out of range", COLS, col + n);
        if ((c == MAC || c == WRGB) && gbi + n > NGB) violation("global-buffer burst out of range", NGB, gbi + n);
        if ((c == MAC && ai >= NACC) || (c == RDACC && ai + cnt > NACC)) violation("accumulator out of range", NACC, ai + cnt);
        if (c == RDACC && bank % BPP != 0) violation("RDACC bank is not the first bank of its PIM unit", 0, bank % BPP);
        if ((c == WR || c == WRGB) && offset >= syms[sym][31:0]) violation("source offset past the host tensor", syms[sym][31:0], offset);
        pus = 0;
        for (b = 0; b < NB; b = b + 1) if ((mask >> b) & 1) begin
            if ((c == ACT || c == REF) && openrow[b] >= 0) violation("bank must be precharged", -1, b);
            if ((c == PRE || c == RD || c == WR || c == MAC) && openrow[b] < 0) violation("bank has no open row", 0, b);
            if (c == MAC && ((pus >> par[9 + NB + b]) & 1)) violation("two banks of one PIM unit in a MAC mask", 0, b);
            pus = pus | (1 << par[9 + NB + b]);
        end
    end
endtask

task fetch;
    reg signed [63:0] earliest;
    begin
        while (!inflight && !done) begin
            w = imem[pc];
            if (^w[7:0] === 1'bx || w[7:0] == 0) begin                // end of the image
                for (b = 0; b < NB; b = b + 1) if (openrow[b] >= 0) violation("bank open at the end of the program", -1, b);
                refresh_end;
                done = 1;
            end else begin
                decode;
                if (c < 0) pc = pc + 1;
                else begin
                    check_static;
                    requirement;
                    earliest = (req > last_bus + 1) ? req : last_bus + 1;
                    if (c == MAC && gbready[gbi] > earliest) earliest = gbready[gbi];
                    if (icyc[pc] == UNSTAMPED) t_next = (earliest > now) ? earliest : now;
                    else begin
                        t_next = $signed(icyc[pc]);
                        if (t_next <= last_bus) violation("one command per cycle, in stream order", last_bus + 1, t_next);
                        else if (t_next < req) begin
                            $display("RTL rule: timing row %0d (%0d->%0d scope %0d latency %0d window %0d)", row_bad,
                                     trow[row_bad][63:56], trow[row_bad][55:48], trow[row_bad][47:40],
                                     trow[row_bad][31:0], trow[row_bad][39:32]);
                            violation("timing table row (above)", req, t_next);
                        end
                        if (c == MAC && t_next < gbready[gbi]) violation("WRGB->MAC global-buffer burst tGB", gbready[gbi], t_next);
                        if (t_next < now) t_next = now;
                    end
                    k = 0;
                    inflight = 1;
                end
            end
        end
    end
endtask
