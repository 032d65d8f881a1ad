/*
 * acl.h — Ascend's runtime (ACL) as HCCL programs include it: here the
 * host-side subset in acl_rt.h, executed on CPUs by libascendcl.
 */
#ifndef INC_EXTERNAL_ACL_ACL_H_
#define INC_EXTERNAL_ACL_ACL_H_

#include "acl/acl_rt.h"

#endif /* INC_EXTERNAL_ACL_ACL_H_ */
