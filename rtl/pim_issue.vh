// pimsat RTL model: issuing command k of the instruction in flight (included in pim_channel):
// its data effect on banks, global buffer and PIM units, the command-log line, the timing
// counters, and when the sweep's next command may issue.

function automatic integer common_row(input integer m);
    integer q, rr;
    begin
        rr = -2;
        for (q = 0; q < NB; q = q + 1) if ((m >> q) & 1) begin
            if (rr == -2) rr = openrow[q];
            else if (openrow[q] != rr) rr = -1;
        end
        common_row = (rr == -2) ? -1 : rr;
    end
endfunction

task mac_burst;
    reg [255:0] d, x;
    reg [511:0] p;
    integer pu, q;
    begin
        x = gb[gbi + k];
        for (b = 0; b < NB; b = b + 1) if (((mask >> b) & 1) && openrow[b] >= 0) begin
            d = mem[(b*ROWS + openrow[b])*COLS + col + k];
            for (q = 0; q < E; q = q + 1) p[32*q +: 32] = fp16_mul_f32(d[16*q +: 16], x[16*q +: 16]);
            pu = par[9 + NB + b];
            acc[pu*NACC + ai] = fp32_add(acc[pu*NACC + ai], burst_sum(p));
        end
    end
endtask

task effect;
    reg [255:0] d;
    integer q, lanes, a, pu;
    begin
        case (c)
            MAC: mac_burst;
            WRGB: begin
                for (q = 0; q < E; q = q + 1) d[16*q +: 16] = hread(sym, offset + k*E + q);
                gb[gbi + k] = d;
                gbready[gbi + k] = now + par[8];
            end
            RD: if (openrow[bank] >= 0) begin
                rd_log[nrd] = mem[(bank*ROWS + openrow[bank])*COLS + col + k];
                nrd = nrd + 1;
            end
            WR: if (openrow[bank] >= 0) begin
                d = mem[(bank*ROWS + openrow[bank])*COLS + col + k];
                lanes = 0;
                for (q = 0; q < E; q = q + 1) lanes = lanes + ((emask >> q) & 1);
                a = 0;
                for (q = 0; q < E; q = q + 1) if ((emask >> q) & 1) begin
                    d[16*q +: 16] = hread(sym, offset + k*lanes + a);
                    a = a + 1;
                end
                mem[(bank*ROWS + openrow[bank])*COLS + col + k] = d;
            end
            RDACC: begin
                pu = par[9 + NB + bank];
                for (a = ai + 8*k; a < ai + cnt && a < ai + 8*k + 8; a = a + 1) begin
                    rdacc_log[nrdacc] = acc[pu*NACC + a];
                    nrdacc = nrdacc + 1;
                    acc[pu*NACC + a] = 0;
                end
            end
            default: ;                                             // ACT, PRE, REF: state, after the sweep
        endcase
    end
endtask

task log_command;
    reg [7:0] lbank;
    reg [15:0] lrow, lcol;
    integer rr;
    begin
        lbank = (mask != 0 && (mask & (mask - 1)) == 0 && c != REF) ? lowest(mask) : 8'hff;
        rr = (c == ACT) ? row : (c == RD || c == WR || c == MAC) ? common_row(mask) : -1;
        lrow = rr;
        lcol = (c == RD || c == WR || c == MAC) ? col + k : (c == WRGB) ? gbi + k : (c == RDACC) ? ai + 8*k : 16'hffff;
        cmdlog[ncmd] = {now[63:0], c[7:0], lbank, mask[7:0], lrow, lcol};
        ncmd = ncmd + 1;
    end
endtask

task issue;
    reg signed [63:0] fin;
    begin
        if (k > 0 && c == MAC && now < gbready[gbi + k]) violation("WRGB->MAC global-buffer burst tGB", gbready[gbi + k], now);
        effect;
        if (c == REF) refresh_issue;
        log_command;
        fin = now + par[c];
        if (fin > done_cycle) done_cycle = fin;
        last_bus = now;
        if (self_window(c)) push(now);
        k = k + 1;
        if (k < n) begin
            t_next = now + gap[c];
            if (c == MAC && gbready[gbi + k] > t_next) t_next = gbready[gbi + k];
        end else begin
            if (!self_window(c)) push(now);
            for (b = 0; b < NB; b = b + 1) if ((mask >> b) & 1) begin
                if (c == ACT) openrow[b] = row;
                if (c == PRE) openrow[b] = -1;
            end
            inflight = 0;
            pc = pc + 1;
        end
    end
endtask
