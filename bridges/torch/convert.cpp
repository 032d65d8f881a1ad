/*
 * convert.cpp — torch's scalar types, reduce ops and tensors as ddpc's
 * (convert.h says what each does).
 */
#include "convert.h"

#include <stdexcept>

namespace ddpc_torch {

std::atomic<bool> serve_privateuse1{ false };

[[noreturn]] void fail(const std::string &what) { throw std::runtime_error("ddpc: " + what); }

ddpc_dtype dtype_of(at::ScalarType t, const char *what) {
    switch (t) {
    case at::kFloat: return DDPC_FLOAT32;
    case at::kDouble: return DDPC_FLOAT64;
    case at::kHalf: return DDPC_FLOAT16;
    case at::kBFloat16: return DDPC_BFLOAT16;
    case at::kChar: return DDPC_INT8;
    case at::kByte: return DDPC_UINT8;
    case at::kBool: return DDPC_UINT8;
    case at::kShort: return DDPC_INT16;
    case at::kInt: return DDPC_INT32;
    case at::kLong: return DDPC_INT64;
    default:
        fail(std::string(what) + ": tensors of dtype " + c10::toString(t) + " are not supported");
    }
}

ddpc_op op_of(const c10d::ReduceOp &rop, at::ScalarType t, const char *what) {
    const bool b = t == at::kBool;
    switch (rop.op_) {
    case c10d::ReduceOp::SUM: return b ? DDPC_MAX : DDPC_SUM;
    case c10d::ReduceOp::AVG:
        if (b) fail(std::string(what) + ": AVG is not defined for bool tensors");
        return DDPC_AVG;
    case c10d::ReduceOp::PRODUCT: return b ? DDPC_MIN : DDPC_PROD;
    case c10d::ReduceOp::MIN: return DDPC_MIN;
    case c10d::ReduceOp::MAX: return DDPC_MAX;
    case c10d::ReduceOp::BAND: return b ? DDPC_MIN : DDPC_BAND;
    case c10d::ReduceOp::BOR: return b ? DDPC_MAX : DDPC_BOR;
    case c10d::ReduceOp::BXOR: return DDPC_BXOR;
    default: fail(std::string(what) + ": this reduce op is not supported (PREMUL_SUM is NCCL's)");
    }
}

/* The dtypes buf_of maps (complex ones as their real pairs). */
static bool dtype_known(at::ScalarType t) {
    switch (t) {
    case at::kFloat:
    case at::kDouble:
    case at::kHalf:
    case at::kBFloat16:
    case at::kChar:
    case at::kByte:
    case at::kBool:
    case at::kShort:
    case at::kInt:
    case at::kLong:
    case at::kComplexFloat:
    case at::kComplexDouble:
    case at::kComplexHalf: return true;
    default: return false;
    }
}

Buf buf_of(const at::Tensor &contiguous, const char *what, bool bytes_ok) {
    if (bytes_ok && !dtype_known(contiguous.scalar_type()))
        return { contiguous.numel() ? contiguous.data_ptr() : nullptr,
                 static_cast<size_t>(contiguous.numel()) * contiguous.element_size(), DDPC_UINT8 };
    at::Tensor t = contiguous.is_complex() ? at::view_as_real(contiguous) : contiguous;
    return { t.numel() ? t.data_ptr() : nullptr, static_cast<size_t>(t.numel()),
             dtype_of(t.scalar_type(), what) };
}

void check_cpu(const at::Tensor &t, const char *what) {
    if (!t.device().is_cpu() &&
        !(serve_privateuse1 && t.device().type() == c10::DeviceType::PrivateUse1))
        fail(std::string(what) + ": tensors must be on the CPU (ddpc moves host memory), got " +
             t.device().str());
    if (t.is_sparse()) fail(std::string(what) + ": sparse tensors are not supported");
}

void check_one(const std::vector<at::Tensor> &ts, const char *what) {
    if (ts.size() != 1)
        fail(std::string(what) + ": expects one tensor per process (one device), got " +
             std::to_string(ts.size()));
    check_cpu(ts[0], what);
}

at::Tensor pack(const std::vector<at::Tensor> &list) {
    std::vector<at::Tensor> flat;
    for (auto &t : list) flat.push_back(t.reshape({ -1 }));
    return at::cat(flat);
}

void unpack(const std::vector<at::Tensor> &list, const at::Tensor &flat) {
    int64_t at = 0;
    for (auto &t : list) {
        t.copy_(flat.narrow(0, at, t.numel()).view(t.sizes()));
        at += t.numel();
    }
}

} // namespace ddpc_torch
