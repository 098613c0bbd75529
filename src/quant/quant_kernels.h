/*
 * quant_kernels.h — hook the kernel table (src/cpu/kernels.c) calls once per
 * ISA table to fill the per-type slots of the quantized types: vec_dot[t],
 * vec_dot_type[t] and from_float[activation type]. See kernels.h.
 */
#ifndef KILN_QUANT_KERNELS_H
#define KILN_QUANT_KERNELS_H

struct kiln_kernels;
void kiln_quant_register_kernels(struct kiln_kernels * k);

#endif
