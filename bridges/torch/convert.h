/*
 * convert.h — torch's values as ddpc's: scalar types as dtypes, reduce ops
 * as ops, a contiguous tensor as (pointer, count, dtype), the checks every
 * call makes on its tensors, and lists of tensors packed into one flat
 * buffer and back. Errors are thrown (fail), never returned.
 */
#ifndef DDPC_TORCH_CONVERT_H
#define DDPC_TORCH_CONVERT_H

#include "compat.h"

#include <ATen/ATen.h>

#include <atomic>
#include <cstddef>
#include <string>
#include <vector>

#include "ddpc/ddpc.h"

namespace ddpc_torch {

/* Throws std::runtime_error("ddpc: " + what), which pybind11 hands Python
 * as a RuntimeError. */
[[noreturn]] void fail(const std::string &what);

/* t as ddpc's dtype (bool as uint8); fails naming `what` for one ddpc has
 * not. */
ddpc_dtype dtype_of(at::ScalarType t, const char *what);

/* rop as ddpc's op for tensors of t: on bool, SUM/BOR are MAX and
 * PRODUCT/BAND are MIN (logical or / and); AVG on bool and PREMUL_SUM fail. */
ddpc_op op_of(const c10d::ReduceOp &rop, at::ScalarType t, const char *what);

/* A tensor as ddpc sees it: pointer, element count, dtype. */
struct Buf {
    void *ptr;
    size_t count;
    ddpc_dtype dt;
};

/* bytes_ok: the call only moves data (broadcast, gathers, scatters,
 * all-to-all, send/recv), so a dtype ddpc cannot reduce (float8, unsigned
 * 16-64 bit, ...) travels as its bytes. */
Buf buf_of(const at::Tensor &contiguous, const char *what, bool bytes_ok = false);

/* Besides the CPU, the device of ddpc_torch_npu (bridges/torch_npu), whose
 * tensors live in host memory; off unless that package turns it on. */
extern std::atomic<bool> serve_privateuse1;

/* Fails unless t is a dense tensor in host memory (the CPU's, or
 * PrivateUse1's when served). */
void check_cpu(const at::Tensor &t, const char *what);

/* Fails unless ts is one such tensor (one device per process). */
void check_one(const std::vector<at::Tensor> &ts, const char *what);

/* A list of tensors as one flat buffer (copied), and a flat buffer's
 * elements copied back into the list it was made from. */
at::Tensor pack(const std::vector<at::Tensor> &list);
void unpack(const std::vector<at::Tensor> &list, const at::Tensor &flat);

} // namespace ddpc_torch

#endif /* DDPC_TORCH_CONVERT_H */
