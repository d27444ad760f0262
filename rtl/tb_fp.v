// pimsat RTL: the arithmetic of fp.vh on its own, for the tests (tests/bringup/test_rtl_fp.py).
//   vvp tb_fp.vvp +in=CASES +out=RESULTS
// CASES: one line per case, {op[7:0], a[31:0], b[31:0]}: op 0 = fp16_mul_f32(a[15:0], b[15:0]),
// op 1 = fp32_add(a, b). RESULTS: the 32-bit result per line.
module tb_fp;
    `include "fp.vh"
    parameter N = 1 << 16;
    reg [71:0] cases [0:N-1];
    reg [31:0] res [0:N-1];
    reg [8*1024-1:0] inp, outp;
    integer i, n;
    initial begin
        if (!$value$plusargs("in=%s", inp) || !$value$plusargs("out=%s", outp)) begin
            $display("usage: vvp tb_fp.vvp +in=CASES +out=RESULTS");
            $finish;
        end
        for (i = 0; i < N; i = i + 1) cases[i] = {72{1'b1}};
        $readmemh(inp, cases);
        n = 0;
        while (n < N && cases[n] !== {72{1'b1}}) begin
            res[n] = (cases[n][71:64] == 0) ? fp16_mul_f32(cases[n][47:32], cases[n][15:0])
                                            : fp32_add(cases[n][63:32], cases[n][31:0]);
            n = n + 1;
        end
        if (n > 0) $writememh(outp, res, 0, n - 1);
        $display("FINISHED %0d cases", n);
        $finish;
    end
endmodule
