/* The parity tests' comparison (test/unit/test_util.h, test_err_*): a NaN or a one-sided infinity
 * anywhere makes the error infinite and names its index, where fmax-based code scored an all-NaN
 * output 0 (issue 45); equal infinities compare equal; the numbers are max |a - b| / max |b|. */
#include <criterion/criterion.h>
#include <math.h>

#include "test/unit/test_util.h"

Test(compare, nan_and_one_sided_infinity_fail_and_name_their_index)
{
    const float ref[4] = {1, -2, 4, 0.5f};
    float out[4] = {1, -2, 4, 0.5f};
    long bad;
    cr_assert_eq(test_err_ff(out, ref, 4, 1.0, &bad), 0.0);
    cr_assert_eq(bad, -1);
    float all_nan[4] = {NAN, NAN, NAN, NAN};
    cr_assert(isinf(test_err_ff(all_nan, ref, 4, 1.0, &bad)), "an all-NaN output must not score 0");
    cr_assert_eq(bad, 0);
    out[2] = INFINITY;
    cr_assert(isinf(test_err_ff(out, ref, 4, 1.0, &bad)) && bad == 2);
    out[2] = 4;
    double dref[4] = {1, -2, NAN, 0.5};
    cr_assert(isinf(test_err_fd(out, dref, 4, &bad)) && bad == 2, "a NaN in the reference fails too");
    double da[2] = {-INFINITY, 3}, db[2] = {-INFINITY, 4};
    cr_assert_float_eq(test_err_dd(da, db, 2, &bad), 0.25, 1e-12, "equal infinities compare equal");
    cr_assert_eq(bad, -1);
    cr_assert_float_eq(test_err_abs_dd(da, db, 2, NULL), 1.0, 1e-12);
    /* a later finite element does not undo an earlier NaN */
    float late[4] = {NAN, -2, 4, 0.5f};
    cr_assert(isinf(test_err_abs_ff(late, ref, 4, &bad)) && bad == 0);
    /* the relative error against a scaled reference */
    const float half[2] = {0.5f, 1}, one[2] = {1, 2};
    cr_assert_float_eq(test_err_ff(one, half, 2, 2.0, NULL), 0.0, 1e-12);
}
