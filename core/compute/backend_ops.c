/* The ops' names and which a backend implements, from the one list of core/compute/backend_ops.h. */
#include "core/compute/backend_ops.h"

#include "core/compute/backend.h"

static const char *const op_names[] = {
#define X(OP, name, ret, params, args) #name,
    BACKEND_OPS(X)
#undef X
};

const char *backend_op_name(backend_op op)
{
    return (unsigned)op < BACKEND_OP_COUNT ? op_names[op] : "?";
}

int backend_supports(const backend *be, backend_op op)
{
    switch (op) {
#define X(OP, name, ret, params, args) \
    case BACKEND_OP_##OP: return be->name != NULL;
        BACKEND_OPS(X)
#undef X
    case BACKEND_OP_COUNT: break;
    }
    return 0;
}
