/*
 * kiln-ops.h — the one op table.
 *
 * Every operator Kiln knows is declared exactly once here. The list is an
 * X-macro: each user defines KILN_OP(...) / KILN_UNARY_OP(...) and includes
 * the list, which generates the op enum, the name and symbol tables, the
 * forward dispatch switch, the work-size switch and (with training) the
 * backward dispatch. Adding an op touches this table, its constructor, its
 * forward kernel, its backward rule and its test — nothing else.
 *
 * Columns of KILN_OP(UPPER, lower, symbol, n_src, tasks, work, grad):
 *   UPPER   enum suffix: KILN_OP_<UPPER>
 *   lower   function suffix: forward kernel kiln_cpu_fwd_<lower>(params, dst),
 *           work-size function kiln_cpu_work_<lower>(dst, n_threads) when work=1
 *   symbol  short human symbol used by kiln_op_symbol / graph printing
 *   n_src   number of sources the op reads (upper bound; optional ones may be NULL)
 *   tasks   threading class, see enum kiln_task_class:
 *             NONE  no compute at all (views: the data is the source's)
 *             ONE   only thread 0 runs the kernel
 *             ALL   every thread runs the kernel and splits rows by ith/nth
 *   work    1 if the op needs scratch memory from the plan's work buffer
 *   grad    1 if a backward rule exists (src/core/backward.c)
 *
 * The order of the enum values follows ggml's enum ggml_op where the ops
 * coincide, so graphs port one to one; the numeric values are not part of
 * the ABI (unlike enum kiln_type, which is the GGUF type id).
 */
#ifndef KILN_OPS_H
#define KILN_OPS_H

#define KILN_OP_LIST(KILN_OP) \
    KILN_OP(NONE,                    none,                    "none",      0, NONE, 0, 0) \
    KILN_OP(DUP,                     dup,                     "x",         1, ALL,  0, 1) \
    KILN_OP(ADD,                     add,                     "x+y",       2, ALL,  0, 1) \
    KILN_OP(ADD1,                    add1,                    "x+1",       2, ALL,  0, 1) \
    KILN_OP(ACC,                     acc,                     "x+=y",      2, ALL,  0, 1) \
    KILN_OP(SUB,                     sub,                     "x-y",       2, ALL,  0, 1) \
    KILN_OP(MUL,                     mul,                     "x*y",       2, ALL,  0, 1) \
    KILN_OP(DIV,                     div,                     "x/y",       2, ALL,  0, 1) \
    KILN_OP(SQR,                     sqr,                     "x^2",       1, ALL,  0, 1) \
    KILN_OP(SQRT,                    sqrt,                    "√x",        1, ALL,  0, 1) \
    KILN_OP(LOG,                     log,                     "log(x)",    1, ALL,  0, 1) \
    KILN_OP(SIN,                     sin,                     "sin(x)",    1, ALL,  0, 1) \
    KILN_OP(COS,                     cos,                     "cos(x)",    1, ALL,  0, 1) \
    KILN_OP(SUM,                     sum,                     "Σx",        1, ONE,  0, 1) \
    KILN_OP(SUM_ROWS,                sum_rows,                "Σx_k",      1, ALL,  0, 1) \
    KILN_OP(MEAN,                    mean,                    "Σx/n",      1, ALL,  0, 1) \
    KILN_OP(ARGMAX,                  argmax,                  "argmax(x)", 1, ALL,  0, 0) \
    KILN_OP(COUNT_EQUAL,             count_equal,             "count_equal(x)", 2, ONE, 0, 0) \
    KILN_OP(REPEAT,                  repeat,                  "repeat(x)", 2, ALL,  0, 1) \
    KILN_OP(REPEAT_BACK,             repeat_back,             "repeat_back(x)", 2, ONE, 0, 1) \
    KILN_OP(CONCAT,                  concat,                  "concat(x, y)", 2, ALL, 0, 1) \
    KILN_OP(SILU_BACK,               silu_back,               "silu_back(x)", 2, ALL, 0, 0) \
    KILN_OP(NORM,                    norm,                    "norm(x)",   1, ALL,  0, 1) \
    KILN_OP(RMS_NORM,                rms_norm,                "rms_norm(x)", 1, ALL, 0, 1) \
    KILN_OP(RMS_NORM_BACK,           rms_norm_back,           "rms_norm_back(x)", 2, ALL, 0, 0) \
    KILN_OP(GROUP_NORM,              group_norm,              "group_norm(x)", 1, ALL, 0, 0) \
    KILN_OP(MUL_MAT,                 mul_mat,                 "X*Y",       2, ALL,  1, 1) \
    KILN_OP(MUL_MAT_ID,              mul_mat_id,              "X[i]*Y",    3, ALL,  1, 1) \
    KILN_OP(MUL_MAT_ID_BACK,         mul_mat_id_back,         "X[i]ᵀ*Y",   3, ALL,  1, 0) \
    KILN_OP(OUT_PROD,                out_prod,                "X×Y",       2, ALL,  1, 1) \
    KILN_OP(OUT_PROD_ID,             out_prod_id,             "X×Y[i]",    3, ALL,  1, 0) \
    KILN_OP(SCALE,                   scale,                   "x*v",       1, ALL,  0, 1) \
    KILN_OP(SET,                     set,                     "y->view(x)", 2, ALL, 0, 1) \
    KILN_OP(CPY,                     cpy,                     "x->y",    2, ALL,  0, 1) \
    KILN_OP(CONT,                    cont,                    "cont(x)",   1, ALL,  0, 1) \
    KILN_OP(RESHAPE,                 reshape,                 "reshape(x)", 1, NONE, 0, 1) \
    KILN_OP(VIEW,                    view,                    "view(x)",   1, NONE, 0, 1) \
    KILN_OP(PERMUTE,                 permute,                 "permute(x)", 1, NONE, 0, 1) \
    KILN_OP(TRANSPOSE,               transpose,               "transpose(x)", 1, NONE, 0, 1) \
    KILN_OP(GET_ROWS,                get_rows,                "get_rows(x)", 2, ALL, 0, 1) \
    KILN_OP(GET_ROWS_BACK,           get_rows_back,           "get_rows_back(x)", 3, ONE, 0, 0) \
    KILN_OP(DIAG,                    diag,                    "diag(x)",   1, ONE,  0, 0) \
    KILN_OP(DIAG_MASK_INF,           diag_mask_inf,           "diag_mask_inf(x)", 1, ALL, 0, 1) \
    KILN_OP(DIAG_MASK_ZERO,          diag_mask_zero,          "diag_mask_zero(x)", 1, ALL, 0, 1) \
    KILN_OP(SOFT_MAX,                soft_max,                "soft_max(x)", 3, ALL, 1, 1) \
    KILN_OP(SOFT_MAX_BACK,           soft_max_back,           "soft_max_back(x)", 2, ALL, 0, 0) \
    KILN_OP(ROPE,                    rope,                    "rope(x)",   3, ALL,  1, 1) \
    KILN_OP(ROPE_BACK,               rope_back,               "rope_back(x)", 3, ALL, 1, 0) \
    KILN_OP(CLAMP,                   clamp,                   "clamp(x)",  1, ALL,  0, 0) \
    KILN_OP(CONV_TRANSPOSE_1D,       conv_transpose_1d,       "conv_transpose_1d(x)", 2, ALL, 1, 0) \
    KILN_OP(IM2COL,                  im2col,                  "im2col(x)", 2, ALL,  0, 1) \
    KILN_OP(IM2COL_BACK,             im2col_back,             "im2col_back(x)", 2, ALL, 0, 0) \
    KILN_OP(CONV_TRANSPOSE_2D,       conv_transpose_2d,       "conv_transpose_2d(x)", 2, ALL, 1, 0) \
    KILN_OP(POOL_1D,                 pool_1d,                 "pool_1d(x)", 1, ALL, 0, 0) \
    KILN_OP(POOL_2D,                 pool_2d,                 "pool_2d(x)", 1, ALL, 0, 1) \
    KILN_OP(POOL_2D_BACK,            pool_2d_back,            "pool_2d_back(x)", 2, ONE, 0, 0) \
    KILN_OP(UPSCALE,                 upscale,                 "upscale(x)", 1, ALL, 0, 0) \
    KILN_OP(PAD,                     pad,                     "pad(x)",    1, ALL,  0, 1) \
    KILN_OP(PAD_REFLECT_1D,          pad_reflect_1d,          "pad_reflect_1d(x)", 1, ALL, 0, 0) \
    KILN_OP(ARANGE,                  arange,                  "arange(start, stop, step)", 0, ALL, 0, 0) \
    KILN_OP(TIMESTEP_EMBEDDING,      timestep_embedding,      "timestep_embedding(timesteps, dim, max_period)", 1, ALL, 0, 0) \
    KILN_OP(ARGSORT,                 argsort,                 "argsort(x)", 1, ALL, 0, 0) \
    KILN_OP(LEAKY_RELU,              leaky_relu,              "leaky_relu(x)", 1, ALL, 0, 1) \
    KILN_OP(FLASH_ATTN_EXT,          flash_attn_ext,          "flash_attn_ext(x)", 4, ALL, 1, 0) \
    KILN_OP(SSM_CONV,                ssm_conv,                "ssm_conv(x)", 2, ALL, 0, 0) \
    KILN_OP(SSM_SCAN,                ssm_scan,                "ssm_scan(x)", 6, ALL, 0, 0) \
    KILN_OP(WIN_PART,                win_part,                "win_part(x)", 1, ONE, 0, 0) \
    KILN_OP(WIN_UNPART,              win_unpart,              "win_unpart(x)", 1, ONE, 0, 0) \
    KILN_OP(GET_REL_POS,             get_rel_pos,             "get_rel_pos(x)", 1, ALL, 0, 0) \
    KILN_OP(ADD_REL_POS,             add_rel_pos,             "add_rel_pos(x)", 3, ALL, 0, 0) \
    KILN_OP(RWKV_WKV6,               rwkv_wkv6,               "rwkv_wkv6(k, v, r, tf, td, s)", 6, ALL, 0, 0) \
    KILN_OP(GATED_LINEAR_ATTN,       gated_linear_attn,       "gated_linear_attn(k, v, q, gate, s)", 5, ALL, 0, 0) \
    KILN_OP(UNARY,                   unary,                   "unary(x)",  1, ALL,  0, 1) \
    KILN_OP(MAP_CUSTOM1,             map_custom1,             "f(x)",      1, ALL,  0, 0) \
    KILN_OP(MAP_CUSTOM2,             map_custom2,             "f(x,y)",    2, ALL,  0, 0) \
    KILN_OP(MAP_CUSTOM3,             map_custom3,             "f(x,y,z)",  3, ALL,  0, 0) \
    KILN_OP(CROSS_ENTROPY_LOSS,      cross_entropy_loss,      "cross_entropy_loss(x,y)", 2, ALL, 1, 1) \
    KILN_OP(CROSS_ENTROPY_LOSS_BACK, cross_entropy_loss_back, "cross_entropy_loss_back(x,y)", 3, ALL, 0, 0) \
    KILN_OP(OPT_STEP_ADAMW,          opt_step_adamw,          "adamw(x)",  5, ALL,  0, 0)

/* Unary ops live behind KILN_OP_UNARY with the unary op id in op_params[0].
 * Columns: KILN_UNARY_OP(UPPER, lower, name) */
#define KILN_UNARY_OP_LIST(KILN_UNARY_OP) \
    KILN_UNARY_OP(ABS,         abs,         "ABS") \
    KILN_UNARY_OP(SGN,         sgn,         "SGN") \
    KILN_UNARY_OP(NEG,         neg,         "NEG") \
    KILN_UNARY_OP(STEP,        step,        "STEP") \
    KILN_UNARY_OP(TANH,        tanh,        "TANH") \
    KILN_UNARY_OP(ELU,         elu,         "ELU") \
    KILN_UNARY_OP(RELU,        relu,        "RELU") \
    KILN_UNARY_OP(SIGMOID,     sigmoid,     "SIGMOID") \
    KILN_UNARY_OP(GELU,        gelu,        "GELU") \
    KILN_UNARY_OP(GELU_QUICK,  gelu_quick,  "GELU_QUICK") \
    KILN_UNARY_OP(SILU,        silu,        "SILU") \
    KILN_UNARY_OP(HARDSWISH,   hardswish,   "HARDSWISH") \
    KILN_UNARY_OP(HARDSIGMOID, hardsigmoid, "HARDSIGMOID") \
    KILN_UNARY_OP(EXP,         exp,         "EXP")

#endif /* KILN_OPS_H */
