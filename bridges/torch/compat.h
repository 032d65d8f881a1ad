/*
 * compat.h — what differs between the torch versions the adapter
 * (ProcessGroupDDPC.h and the files it names) builds against, in one place: Debian 12's torch 1.13 (make torch) and
 * pip's torch 2.x (pip install ./bridges/torch).
 *
 *   - the class a backend derives from: torch 1.13's Python plugins return a
 *     c10d::ProcessGroup; torch 2.x's return a c10d::Backend, which a
 *     ProcessGroup holds per device type;
 *   - the collectives only torch 2.x has (the tensor forms of coalesced
 *     all-gather and reduce-scatter), compiled where their virtuals exist;
 *   - the group-wide sequence number: a member of 1.13's ProcessGroup, kept
 *     by the backend itself on 2.x;
 *   - whether a call is synchronous: the options' asyncOp, which newer
 *     torch 2.x sets false for a blocking torch.distributed call (is_sync,
 *     false where the options have no such field).
 * Everything else (Work, the options structs, Store, ReduceOp) has one form.
 */
#ifndef DDPC_TORCH_COMPAT_H
#define DDPC_TORCH_COMPAT_H

#include <torch/version.h>

#if TORCH_VERSION_MAJOR >= 2
#define DDPC_TORCH2 1
#include <torch/csrc/distributed/c10d/Backend.hpp>
#else
#define DDPC_TORCH2 0
#include <torch/csrc/distributed/c10d/ProcessGroup.hpp>
#endif
#include <torch/csrc/distributed/c10d/Store.hpp>
#include <torch/csrc/distributed/c10d/Types.hpp>
#include <torch/csrc/distributed/c10d/Work.hpp>

namespace ddpc_torch {

#if DDPC_TORCH2
using BackendBase = c10d::Backend;
#else
using BackendBase = c10d::ProcessGroup;
#endif

/* Whether the caller said it waits at once (options.asyncOp == false); false
 * where the options struct has no asyncOp (torch 1.13, early 2.x). */
template <typename Opts>
constexpr auto is_sync_(const Opts &o, int) -> decltype(o.asyncOp, bool()) {
    return !o.asyncOp;
}
template <typename Opts> constexpr bool is_sync_(const Opts &, long) { return false; }
template <typename Opts> constexpr bool is_sync(const Opts &o) { return is_sync_(o, 0); }

/* "2.13.0" or "1.13.1": the torch the module was compiled against, which
 * __init__.py compares with the torch it is loaded into. */
inline const char *built_torch_version() { return TORCH_VERSION; }

} // namespace ddpc_torch

#endif /* DDPC_TORCH_COMPAT_H */
