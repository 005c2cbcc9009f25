"""The README's port of a Hugging Face decoder (`port_model`), against transformers' own logits.

Tiny random-weight Llama (llama3 scaling, grouped-query attention) and Gemma 3 (two rope types,
a sliding window of 4 crossed by a 10-token sequence) from `port_weights`; CI needs no torch."""

import numpy as np
import pytest
import tensorflow as tf
from port_model import Port, readme_port
from port_weights import GEMMA3, LLAMA, TOKENS, weights

# Printed by transformers 5.24.0 (torch 2.14.1), `AutoModelForCausalLM.from_config` of the same
# config with `attn_implementation="eager"`, the weights of `port_weights.weights(config)` loaded,
# `model.to(torch.float64)(TOKENS).logits[0]`.
TRANSFORMERS_LLAMA_LOGITS = np.array(
    [
        [
            -1.4138078,
            -2.11872129,
            -0.0840734375,
            0.0690359179,
            1.41523859,
            -0.978127379,
            0.237409465,
            1.8695347,
            -0.445723916,
            -0.454508626,
            1.33198,
            0.469912688,
            -0.453062862,
            -0.830817853,
            -0.97829698,
            0.203739945,
        ],
        [
            0.191927492,
            -0.0900666656,
            -0.665796008,
            -0.395157968,
            2.01084051,
            1.2459808,
            -1.17157544,
            1.44339488,
            -0.764941965,
            -0.823071871,
            0.487845153,
            0.255452163,
            -0.0406787006,
            0.245310635,
            -0.646365131,
            0.501701496,
        ],
        [
            0.0289970615,
            -0.780002201,
            -0.028593322,
            -0.543107119,
            0.507495287,
            0.553222242,
            -0.112562762,
            1.38123649,
            -1.51572263,
            -0.155008508,
            0.384498184,
            -0.359028479,
            0.680124468,
            -0.0545711835,
            -0.245935679,
            -1.25854127,
        ],
        [
            0.815992039,
            -0.661780565,
            -1.45494905,
            -0.575467965,
            -0.980739623,
            1.62857918,
            -0.351997349,
            -0.216942862,
            -0.650832345,
            -1.73784292,
            -0.500127529,
            1.62507573,
            0.980087989,
            -0.725578717,
            -0.677932401,
            -1.31069159,
        ],
        [
            -1.16005344,
            -0.213568299,
            0.487791889,
            -1.35423791,
            -0.377386992,
            0.166304631,
            2.31081155,
            -0.5700207,
            -0.0773189129,
            1.14034045,
            -0.719277939,
            0.0342125061,
            0.725271629,
            -0.462963354,
            -0.122323516,
            0.621013959,
        ],
        [
            0.698585358,
            -0.902752365,
            -1.72921763,
            0.104401129,
            1.6196806,
            0.693948071,
            -2.05293286,
            -1.21566701,
            -0.774941281,
            -1.19036447,
            0.277027277,
            0.738958985,
            0.0656778784,
            0.0688307393,
            -0.937124207,
            -0.31886567,
        ],
        [
            1.9553566,
            -0.231407918,
            0.591299867,
            -0.840979402,
            1.00345464,
            -0.161788279,
            -0.601194374,
            -0.211286598,
            -0.370872382,
            -1.88210626,
            0.512642898,
            1.48882714,
            2.09110663,
            0.0643392407,
            -0.0602848878,
            -0.0443324986,
        ],
        [
            1.64366021,
            -0.0141000617,
            -1.39756737,
            -0.2939871,
            0.590072043,
            2.39529082,
            -0.19060087,
            -1.20914874,
            -0.30630781,
            -1.57495002,
            -0.414618661,
            1.15316935,
            1.89786775,
            0.0930302658,
            -0.324486489,
            -0.560527158,
        ],
        [
            0.08351033,
            0.898465699,
            -0.75050599,
            -0.69863511,
            1.54095216,
            -1.06486678,
            -0.0950138707,
            0.24998224,
            -0.190383617,
            -0.802306169,
            0.757920308,
            1.81038106,
            1.69749098,
            -0.681111762,
            -0.907137848,
            0.622755913,
        ],
        [
            1.43579136,
            -0.0508024639,
            -1.33860445,
            -0.415357181,
            0.529927744,
            2.34000641,
            0.152296324,
            -1.60555372,
            -0.276089183,
            -1.41579133,
            -0.40119443,
            0.866166431,
            1.80098378,
            0.141047741,
            -0.486256286,
            -0.479811693,
        ],
    ]
)
TRANSFORMERS_GEMMA3_LOGITS = np.array(
    [
        [
            7.45011062,
            -7.13590123,
            -7.91416283,
            23.938223,
            4.10159115,
            -0.294225522,
            -6.7412657,
            11.4146925,
            -2.73703556,
            3.35755871,
            1.26183883,
            -4.12017705,
            -1.31274139,
            -7.30739974,
            0.443625278,
            -0.897553244,
        ],
        [
            5.13113708,
            2.9404244,
            -0.259223552,
            2.08876794,
            2.55948531,
            3.60571883,
            3.73515099,
            -0.725572642,
            7.26833099,
            -2.42152381,
            -5.27903877,
            9.3278816,
            6.89515032,
            1.01513442,
            33.3665004,
            5.02524789,
        ],
        [
            -1.00874367,
            28.7994513,
            3.76282815,
            -7.43161677,
            1.04073915,
            -10.5062443,
            -0.729528768,
            -5.61716793,
            3.48968024,
            -7.90194236,
            -10.2349754,
            8.30799036,
            4.23857497,
            -0.148911559,
            -1.55775732,
            -0.0585994453,
        ],
        [
            -8.24972594,
            -8.86835961,
            5.29134038,
            -1.26925173,
            1.45650838,
            27.0965357,
            6.33955244,
            -9.82710295,
            0.72466829,
            -2.59312709,
            -1.62339776,
            1.3109343,
            5.25539266,
            4.02442564,
            9.12554786,
            5.34402121,
        ],
        [
            3.17817853,
            -9.01430994,
            -16.4284274,
            5.74097777,
            6.2221169,
            -0.137736302,
            7.19851144,
            1.60540604,
            1.03600279,
            27.582116,
            -2.88976835,
            3.83728983,
            0.484203883,
            2.13406547,
            -0.5912595,
            12.4715944,
        ],
        [
            -4.33413843,
            0.682943421,
            30.2285813,
            -4.33649172,
            -6.24148861,
            7.39964429,
            3.9216953,
            -3.38736141,
            5.27725998,
            -13.7931937,
            7.23675689,
            1.67109306,
            2.25120922,
            -1.49964904,
            4.74946645,
            -7.82507212,
        ],
        [
            2.7642235,
            -3.51862549,
            1.89287659,
            -6.31385781,
            -2.2001071,
            2.09343806,
            31.755725,
            -6.6761394,
            4.74171236,
            3.2574137,
            -0.567693282,
            3.10607618,
            14.6879824,
            10.5920098,
            5.38346062,
            9.0222385,
        ],
        [
            -7.24184201,
            -12.1374565,
            2.01605383,
            0.952797863,
            3.62840861,
            27.1848919,
            6.16209958,
            -12.4926836,
            5.04003833,
            0.402304739,
            -0.331245745,
            -1.02537148,
            5.56132038,
            5.95720374,
            7.15726904,
            5.39623072,
        ],
        [
            6.22156127,
            -8.28713041,
            -6.07001771,
            25.5385614,
            4.39478372,
            2.90977592,
            -6.23915842,
            5.06958062,
            -1.97127812,
            3.58634485,
            4.10819575,
            -4.03454052,
            -2.68139252,
            -8.4403536,
            1.99852971,
            -2.50439446,
        ],
        [
            -7.56614068,
            -11.2908922,
            2.67950648,
            0.521803845,
            4.4569818,
            26.7619737,
            6.00629808,
            -11.5186438,
            2.37743714,
            0.211866412,
            1.31634118,
            -1.79091177,
            4.83029776,
            4.49924928,
            8.65636313,
            6.83360186,
        ],
    ]
)

CONFIGS = {"llama": (LLAMA, TRANSFORMERS_LLAMA_LOGITS), "gemma3": (GEMMA3, TRANSFORMERS_GEMMA3_LOGITS)}
# float32 against float64 logits of about unit size: transformers' own float32 model is 8.8e-7
# (Llama) and 8.7e-6 (Gemma 3) off its float64 one.
LOGIT_BOUND = 1e-5
SLOTS = 16


@pytest.fixture(scope="module")
def port():
    return readme_port()


@pytest.mark.parametrize("family", CONFIGS)
def test_port_gives_transformers_logits(family, port):
    config, expected = CONFIGS[family]
    model = Port(config, weights(config), port)
    logits, _ = model(TOKENS, model.empty_cache(SLOTS), 0)
    assert np.abs(logits.numpy()[0] - expected).max() <= LOGIT_BOUND


def test_gemma3_port_depends_on_its_sliding_window(port):
    # Without the window the sliding layers see every earlier token: the logits move far past
    # the bound, so the test above checks the window.
    model = Port(GEMMA3, weights(GEMMA3), port)
    for attention in model.attention:
        attention.sliding_window = None
    logits, _ = model(TOKENS, model.empty_cache(SLOTS), 0)
    assert np.abs(logits.numpy()[0] - TRANSFORMERS_GEMMA3_LOGITS).max() > 100 * LOGIT_BOUND


@pytest.mark.parametrize("family", CONFIGS)
@pytest.mark.parametrize("mode", ["eager", "graph"])
def test_prompt_then_single_token_steps_give_the_full_pass(family, mode, port):
    config, expected = CONFIGS[family]
    model = Port(config, weights(config), port)
    step = model if mode == "eager" else tf.function(model)
    cache = model.empty_cache(SLOTS)
    logits, cache = step(TOKENS[:, :6], cache, tf.constant(0))
    pieces = [logits.numpy()[0]]
    for index in range(6, TOKENS.shape[1]):  # past the sliding window of 4
        logits, cache = step(TOKENS[:, index : index + 1], cache, tf.constant(index))
        pieces.append(logits.numpy()[0])
    full, _ = model(TOKENS, model.empty_cache(SLOTS), 0)
    assert np.abs(np.concatenate(pieces) - full.numpy()[0]).max() <= LOGIT_BOUND
    assert np.abs(np.concatenate(pieces) - expected).max() <= LOGIT_BOUND


@pytest.mark.parametrize("family", CONFIGS)
def test_each_steps_rows_are_the_full_pass_rows_bit_for_bit(family, port):
    config, _ = CONFIGS[family]
    model = Port(config, weights(config), port)
    full = port["rows_for_step"](model.plan, config["head_dim"], 0, TOKENS.shape[1])
    for index in range(TOKENS.shape[1]):
        step = port["rows_for_step"](model.plan, config["head_dim"], tf.constant(index), 1)
        assert step.keys() == full.keys()
        for name, (cos, sin) in step.items():
            np.testing.assert_array_equal(cos.numpy()[0, 0], full[name][0].numpy()[0, index])
            np.testing.assert_array_equal(sin.numpy()[0, 0], full[name][1].numpy()[0, index])
