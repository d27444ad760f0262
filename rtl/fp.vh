// pimsat RTL model: the PIM unit's arithmetic (hwmodel/numerics.py, docs/isa.md "MAC numerics").
// Included inside a module: plain functions on bit patterns, no state.
//
// fp16_mul_f32  fp16 x fp16 -> fp32, exact: 11 x 11 significand bits make at most 22, and the
//               product's exponent (-48 .. +31) is always a normal fp32 exponent.
// fp32_add      fp32 + fp32 -> fp32, IEEE 754 round to nearest, ties to even; subnormals kept
//               (no flush to zero); x + (-x) = +0; -0 + -0 = -0.
// burst_sum     16 fp32 products -> their sum by the balanced adder tree: level 1 adds lane j
//               and lane j + 8 (j < 8), level 2 j and j + 4 of those, then j and j + 2, then 0 and 1.
// NaN results are the quiet NaN 7fc00000 (pimsat's data never makes one).

localparam [31:0] FP32_QNAN = 32'h7fc00000;

function automatic [31:0] fp16_mul_f32(input [15:0] a, input [15:0] b);
    reg sa, sb, s;
    reg [4:0] ea, eb;
    reg [10:0] ma, mb;
    reg [21:0] prod;
    integer xa, xb, p, k, e32;
    reg [22:0] frac;
    begin
        sa = a[15]; sb = b[15]; s = sa ^ sb;
        ea = a[14:10]; eb = b[14:10];
        if (ea == 5'h1f || eb == 5'h1f) begin
            if ((ea == 5'h1f && a[9:0] != 0) || (eb == 5'h1f && b[9:0] != 0))
                fp16_mul_f32 = FP32_QNAN;
            else if ((ea != 5'h1f && a[14:0] == 0) || (eb != 5'h1f && b[14:0] == 0))
                fp16_mul_f32 = FP32_QNAN;                       // inf x 0
            else
                fp16_mul_f32 = {s, 8'hff, 23'd0};
        end else begin
            ma = (ea == 0) ? {1'b0, a[9:0]} : {1'b1, a[9:0]};
            mb = (eb == 0) ? {1'b0, b[9:0]} : {1'b1, b[9:0]};
            xa = (ea == 0) ? -14 : ea - 15;                   // value = m * 2^(x - 10)
            xb = (eb == 0) ? -14 : eb - 15;
            prod = ma * mb;
            if (prod == 0) begin
                fp16_mul_f32 = {s, 31'd0};
            end else begin
                p = 0;
                for (k = 0; k < 22; k = k + 1)
                    if (prod[k]) p = k;                        // leading one
                e32 = p + xa + xb - 20 + 127;
                frac = (prod << (23 - p));                     // the bits below the leading one
                fp16_mul_f32 = {s, e32[7:0], frac[22:0]};
            end
        end
    end
endfunction

// Exact alignment for exponent differences up to 26 (the smaller significand keeps every bit);
// beyond that its bits are ORed into the lowest (sticky) bit, which is far below the rounding bit.
function automatic [31:0] fp32_add(input [31:0] a, input [31:0] b);
    reg sa, sb, sbig, ssml;
    reg [7:0] ea, eb;
    reg [23:0] ma, mb, mbig, msml;
    integer xa, xb, xbig, d, x;
    reg [50:0] wbig, wsml, m, lost;
    reg sticky, half, rest, lsb;
    reg [24:0] r;
    begin
        sa = a[31]; sb = b[31]; ea = a[30:23]; eb = b[30:23];
        if (ea == 8'hff || eb == 8'hff) begin
            if ((ea == 8'hff && a[22:0] != 0) || (eb == 8'hff && b[22:0] != 0))
                fp32_add = FP32_QNAN;
            else if (ea == 8'hff && eb == 8'hff && sa != sb)
                fp32_add = FP32_QNAN;                           // inf - inf
            else
                fp32_add = (ea == 8'hff) ? a : b;
        end else begin
            ma = (ea == 0) ? {1'b0, a[22:0]} : {1'b1, a[22:0]};
            mb = (eb == 0) ? {1'b0, b[22:0]} : {1'b1, b[22:0]};
            xa = (ea == 0) ? 1 : ea;                             // value = m * 2^(x - 150)
            xb = (eb == 0) ? 1 : eb;
            if (xa > xb || (xa == xb && ma >= mb)) begin
                mbig = ma; sbig = sa; xbig = xa; msml = mb; ssml = sb; d = xa - xb;
            end else begin
                mbig = mb; sbig = sb; xbig = xb; msml = ma; ssml = sa; d = xb - xa;
            end
            wbig = {1'b0, mbig, 26'd0};                          // significand in [49:26]
            wsml = {1'b0, msml, 26'd0};
            sticky = 0;
            if (d > 50) begin
                sticky = (msml != 0);
                wsml = 0;
            end else if (d > 0) begin
                lost = wsml & ((51'd1 << d) - 1);
                sticky = (lost != 0);
                wsml = wsml >> d;
            end
            if (sbig == ssml) m = wbig + wsml;
            else m = wbig - wsml - sticky;                        // sticky: a borrow from below
            if (m == 0 && !sticky) begin
                fp32_add = {sa & sb, 31'd0};                      // exact zero: +0 unless -0 + -0
            end else begin
                x = xbig;
                if (m[50]) begin                                  // carry out
                    sticky = sticky | m[0];
                    m = m >> 1;
                    x = x + 1;
                end
                while (!m[49] && x > 1) begin
                    m = m << 1;
                    x = x - 1;
                end
                half = m[25];
                rest = (m[24:0] != 0) || sticky;
                lsb = m[26];
                r = {1'b0, m[49:26]};
                if (half && (rest || lsb)) r = r + 1;
                if (r[24]) begin
                    r = r >> 1;
                    x = x + 1;
                end
                if (x >= 255) fp32_add = {sbig, 8'hff, 23'd0};
                else if (!r[23]) fp32_add = {sbig, 8'd0, r[22:0]};     // subnormal
                else fp32_add = {sbig, x[7:0], r[22:0]};
            end
        end
    end
endfunction

function automatic [31:0] burst_sum(input [511:0] p);   // lane j in p[32j+31:32j]
    reg [31:0] s [0:15];
    integer j, w;
    begin
        for (j = 0; j < 16; j = j + 1) s[j] = p[32*j +: 32];
        for (w = 8; w >= 1; w = w / 2)
            for (j = 0; j < w; j = j + 1) s[j] = fp32_add(s[j], s[j + w]);
        burst_sum = s[0];
    end
endfunction
