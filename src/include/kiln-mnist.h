/*
 * kiln-mnist.h — the (Fashion-)MNIST example models, built on the public
 * API: a fully connected network 784-500-10 and a small CNN
 * (conv 3x3 -> max pool -> conv 3x3 -> max pool -> dense). Weights are saved
 * to and loaded from GGUF.
 */
#ifndef KILN_MNIST_H
#define KILN_MNIST_H

#include "kiln.h"

#ifdef __cplusplus
extern "C" {
#endif

#define KILN_MNIST_NX 28
#define KILN_MNIST_NPIXELS (KILN_MNIST_NX * KILN_MNIST_NX)
#define KILN_MNIST_NCLASSES 10
#define KILN_MNIST_NHIDDEN 500

enum kiln_mnist_arch { KILN_MNIST_FC, KILN_MNIST_CNN };

struct kiln_mnist_model {
    enum kiln_mnist_arch arch;
    struct kiln_context * ctx_weights; /* parameters, with data */
    struct kiln_context * ctx_compute; /* the forward graph's tensors (no data) */
    int nbatch;
    struct kiln_tensor * images;       /* input  [784, nbatch] (FC) / [28, 28, 1, nbatch] (CNN) */
    struct kiln_tensor * logits;       /* output [10, nbatch] */

    struct kiln_tensor * fc1_w, * fc1_b, * fc2_w, * fc2_b;
    struct kiln_tensor * conv1_k, * conv1_b, * conv2_k, * conv2_b, * dense_w, * dense_b;
};

/* "fc" / "cnn"; -1 when unknown */
int kiln_mnist_arch_from_name(const char * name);
const char * kiln_mnist_arch_name(enum kiln_mnist_arch arch);

/* new model with weights drawn from U(-1/sqrt(fan_in), 1/sqrt(fan_in)) for a seed */
struct kiln_mnist_model * kiln_mnist_model_init_random(enum kiln_mnist_arch arch, uint64_t seed);
/* weights from a GGUF written by kiln_mnist_model_save */
struct kiln_mnist_model * kiln_mnist_model_load(const char * path);
bool kiln_mnist_model_save(const struct kiln_mnist_model * model, const char * path);
/* (re)builds the forward graph for batches of nbatch images; marks the
 * weights as parameters when `trainable` */
bool kiln_mnist_model_build(struct kiln_mnist_model * model, int nbatch, bool trainable);
void kiln_mnist_model_free(struct kiln_mnist_model * model);

/* Validates an IDX file of unsigned bytes held in memory (buf, size) with
 * want_dims dimensions; dims receives the sizes, *data the first byte of the
 * payload. false with a message when malformed or truncated. */
bool kiln_mnist_parse_idx(const uint8_t * buf, size_t size, int want_dims, int64_t dims[3], const uint8_t ** data);
struct kiln_opt_dataset;
/* A dataset from n images (n*784 bytes, scaled to [0, 1]) and n labels
 * (one-hot over 10 classes); NULL with a message on a label out of range. */
struct kiln_opt_dataset * kiln_mnist_dataset(const uint8_t * images, const uint8_t * labels, int64_t n);
/* Reads <dir>/<prefix>-images-idx3-ubyte and -labels-idx1-ubyte
 * (uncompressed) into a dataset of at most limit images (limit <= 0: all). */
struct kiln_opt_dataset * kiln_mnist_dataset_load(const char * dir, const char * prefix, int64_t limit);

#ifdef __cplusplus
}
#endif

#endif
