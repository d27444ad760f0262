// pimsat RTL testbench: runs one channel of a bring-up bundle in pim_channel.
//
//   vvp tb.vvp +bundle=BUNDLE +ch=ch00 +out=OUT
//
// Loads (all $readmemh) BUNDLE/program/<ch>.words.hex and .cycles.hex, memory/<ch>_b<bank>.hex,
// host/memory.hex and symbols.hex, rtl/timing.hex and params.hex; clocks the channel until its
// instruction image ends; writes (all $writememh, the golden files' formats) OUT/<ch>.summary.hex,
// <ch>.cmdlog.hex, <ch>.rdacc.hex, <ch>.rd.hex and <ch>_b<bank>.final.hex. Prints FINISHED and
// the summary; compare OUT with BUNDLE/golden (pimsat rtl-run does, line by line).
`timescale 1ns / 1ps
module tb_channel;
    parameter NB = 4, ROWS = 64, COLS = 8, NACC = 8, NGB = 8, BPP = 2, NG = 2;
    parameter MAXCYCLES = 64'd100000000;

    reg clk = 0;
    wire done;
    pim_channel #(.NB(NB), .ROWS(ROWS), .COLS(COLS), .NACC(NACC), .NGB(NGB), .BPP(BPP), .NG(NG)) dut (
        .clk(clk), .done(done)
    );

    reg [8*1024-1:0] bundle, ch, out, path;
    integer b, fd;
    localparam BANK = ROWS * COLS;

    task dump(input [8*1024-1:0] name, input integer what, input integer count);
        begin
            $sformat(path, "%0s/%0s.%0s", out, ch, name);
            if (count == 0) begin                                  // $writememh needs a range: an empty file
                fd = $fopen(path, "w");
                $fclose(fd);
            end else case (what)
                0: $writememh(path, dut.cmdlog, 0, count - 1);
                1: $writememh(path, dut.rdacc_log, 0, count - 1);
                default: $writememh(path, dut.rd_log, 0, count - 1);
            endcase
        end
    endtask

    initial begin
        if (!$value$plusargs("bundle=%s", bundle) || !$value$plusargs("ch=%s", ch) || !$value$plusargs("out=%s", out)) begin
            $display("usage: vvp tb.vvp +bundle=BUNDLE +ch=ch00 +out=OUT");
            $finish;
        end
        #1;                                                        // after pim_channel's own initial block
        $sformat(path, "%0s/program/%0s.words.hex", bundle, ch);  $readmemh(path, dut.imem);
        $sformat(path, "%0s/program/%0s.cycles.hex", bundle, ch); $readmemh(path, dut.icyc);
        for (b = 0; b < NB; b = b + 1) begin
            $sformat(path, "%0s/memory/%0s_b%0d.hex", bundle, ch, b);
            $readmemh(path, dut.mem, b * BANK, (b + 1) * BANK - 1);
        end
        $sformat(path, "%0s/host/memory.hex", bundle);   $readmemh(path, dut.hmem);
        $sformat(path, "%0s/host/symbols.hex", bundle);  $readmemh(path, dut.syms);
        $sformat(path, "%0s/rtl/timing.hex", bundle);    $readmemh(path, dut.trow);
        $sformat(path, "%0s/rtl/params.hex", bundle);    $readmemh(path, dut.par);
        dut.setup;
        while (!done && dut.now < MAXCYCLES) begin
            #5 clk = 1;
            #5 clk = 0;
        end
        if (!done) dut.violation("program did not end within MAXCYCLES", MAXCYCLES, dut.now);
        dut.summary[0] = dut.ncmd;
        dut.summary[1] = dut.done_cycle;
        dut.summary[2] = dut.violations;
        $sformat(path, "%0s/%0s.summary.hex", out, ch); $writememh(path, dut.summary);
        dump("cmdlog.hex", 0, dut.ncmd);
        dump("rdacc.hex", 1, dut.nrdacc);
        dump("rd.hex", 2, dut.nrd);
        for (b = 0; b < NB; b = b + 1) begin
            $sformat(path, "%0s/%0s_b%0d.final.hex", out, ch, b);
            $writememh(path, dut.mem, b * BANK, (b + 1) * BANK - 1);
        end
        $display("FINISHED %0s: %0d commands, last completion %0d, %0d RDACC values, %0d RD bursts, %0d violations",
                 ch, dut.ncmd, dut.done_cycle, dut.nrdacc, dut.nrd, dut.violations);
        $finish;
    end
endmodule
