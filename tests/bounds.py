"""The tolerances of the tests, each named once."""

from tf_posenc._rows import row_error_bound

# Rows alone against the exact values: the route's bound, in the rows' dtype (2**-24 for float32).
ROW_BOUND = {
    policy: row_error_bound(dtype)
    for policy, dtype in {
        "float32": "float32",
        "mixed_float16": "float16",
        "mixed_bfloat16": "bfloat16",
    }.items()
}
# An output of inputs of size about 1 plus rows, per dtype policy: one unit in the last place at
# 1.0 of the compute dtype (the inputs' rounding and the rows', each half of it). Float64 output
# has no rounding step to hide behind: two float64 evaluations of an angle near 2**20 rad may
# differ in its last bit (~1e-10 rad), which bounds any agreement.
BOUND = {"float32": 2**-23, "mixed_float16": 2**-10, "mixed_bfloat16": 2**-7, "float64": 1e-9}
FLOAT32_UNIT = BOUND["float32"]
# A rotation against a float64 one, relative to the largest magnitude: the inputs' rounding, the
# cosine's and the sine's (a row bound each) and the one rounding of the result.
ROTATION_BOUND = 4 * ROW_BOUND["float32"]
