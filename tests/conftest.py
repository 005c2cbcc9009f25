import os

import pytest

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

# The files that take longest, first: `--dist loadfile` hands files to the two workers in the
# order they are collected, and a long file collected last leaves one worker idle.
LONGEST_FIRST = (
    "test_jax.py",
    "test_tf_keras.py",
    "test_notebook.py",
    "test_rope_types.py",
    "test_packing.py",
    "test_runtimes.py",
    "test_attention.py",
    "test_keras_hub.py",
)


# Parametrized tests of many cases, each a second or so: the quick suite (`-m "not slow"`) runs
# the cases named here and the others run with `slow` (every one in CI). The cases kept cover each
# mechanism once; the rest repeat it for another layer, dtype or size.
QUICK_CASES = {
    "test_keras_layer_harness": {
        "encoding-start-index", "embedding", "alibi-positions", "t5-bias", "window-bias", "continuous-bias",
        "learned-patch", "timestep",
    },
    "test_rows_in_a_compiled_step_of_unknown_length_have_the_bits_of_a_call": {"xla-plain", "graph-bfloat16"},
    "test_an_eager_call_gives_the_bits_of_a_static_graph": {
        "alibi", "alibi-positions", "continuous-bias", "embedding", "encoding", "encoding-positions",
        "encoding-start-index", "learned-patch", "patch", "rotary", "rotary-llama3-partial",
        "rotary-yarn-interleave", "t5-bias", "timestep", "window-bias",
    },
    "test_rows_rotate_queries_and_keys_with_the_bits_of_a_call": {"plain", "float64", "partial"},
    "test_timestep_embedding_matches_get_timestep_embedding": {
        "d32-ddpm", "d32-period-and-shift", "d32-scaled", "d32-stable-diffusion",
    },
    "test_timestep_embedding_takes_every_float_timestep": {"float32"},
    "test_positions_restart_at_every_document": {"7"},
    "test_a_changed_dtype_policy_gets_a_fresh_layers_bits_and_dtype": {"encoding"},
    "test_rotation_is_exact_at_every_start": {
        "half-float32-start0", "half-mixed_float16-start1048512", "interleave-mixed_bfloat16-start65536",
    },
    "test_decoding_one_token_at_a_time_has_the_full_pass_bits": {"dynamic_ntk", "yarn", "longrope"},
    # One case of each mechanism: a config's family, a file's round trip, a dtype policy, a port.
    "test_each_family_round_trips_through_its_config_and_a_keras_file": {"llama-3.1-8b", "deepseek-v3"},
    "test_configs_round_trip_and_reload": {"timesteps", "patches"},
    "test_video_layer_is_diffusers_3d_table": {"mixed_bfloat16"},
    "test_the_pages_greedy_generation_is_transformers": {"llama"},
    "test_port_gives_transformers_logits": {"llama", "phi3-longrope"},
    "test_patch_layer_adds_the_rounded_table": {"flat-float32", "variable-with-base-size-mixed_bfloat16"},
    "test_float_positions_under_mixed_precision_are_the_integer_ones": {
        "mha-mixed_float16", "gqa-mixed_bfloat16",
    },
}  # fmt: skip


@pytest.hookimpl(tryfirst=True)  # before `-m` deselects by the marks
def pytest_collection_modifyitems(items):
    for item in items:
        quick = QUICK_CASES.get(getattr(item, "originalname", None))
        callspec = getattr(item, "callspec", None)  # a test of the same name without cases stays
        if quick is not None and callspec is not None and callspec.id not in quick:
            item.add_marker(pytest.mark.slow)

    def rank(item):
        name = item.path.name
        return LONGEST_FIRST.index(name) if name in LONGEST_FIRST else len(LONGEST_FIRST)

    items.sort(key=rank)  # stable: the order within a file, and of the other files, is kept
