"""The tolerances of the tests, each named once, written as numbers: the bound the code
documents (`tf_posenc._rows.row_error_bound`) is checked against them
(`test_numerics.py::test_the_documented_row_bound_is_within_the_tests_row_bound`), so loosening
the code's claim fails a test instead of loosening every test."""

# Rows alone against the exact values, per dtype policy: one unit of the rows' dtype in [0.5, 1)
# (2**-24 for float32: half of it the final rounding); float64 rows keep the route's two float32
# parts, whose error is below 2**-36.
ROW_BOUND = {"float32": 2**-24, "mixed_float16": 2**-11, "mixed_bfloat16": 2**-8, "float64": 2**-36}
# The dtype policy whose compute dtype each rows' dtype is.
POLICY_OF_DTYPE = {
    "float32": "float32",
    "float16": "mixed_float16",
    "bfloat16": "mixed_bfloat16",
    "float64": "float64",
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
