"""The port of a Hugging Face decoder in docs/porting.md (`port_model`), against transformers' own logits.

Tiny random-weight Llama (llama3 scaling, grouped-query attention) and Gemma 3 (two rope types,
a sliding window of 4 crossed by a 10-token sequence) from `port_weights`; CI needs no torch."""

import numpy as np
import pytest
import tensorflow as tf
from keras import ops
from port_model import Port, page_port
from port_weights import GEMMA3, LLAMA, PHI3, TOKENS, weights
from test_attention import PLAN_CONFIGS, TINY

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

# The same for Phi-3's LongRoPE (pretraining context 8, partial rotation 0.5): a full pass of the 10
# tokens (every position past the switch: the long factors), and the prompt `TOKENS[:, :6]`
# followed by single-token steps with transformers' cache, `model(token, past_key_values=cache,
# use_cache=True)`: the keys cached before the switch keep the short factors.
TRANSFORMERS_PHI3_LOGITS = np.array(
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
            0.148653823,
            -0.126124991,
            -0.640923259,
            -0.375820288,
            1.99413632,
            1.26010214,
            -1.02785289,
            1.27639608,
            -0.671627293,
            -0.671681585,
            0.422926144,
            0.141292045,
            -0.189301039,
            0.170154846,
            -0.846132404,
            0.384885314,
        ],
        [
            -0.268806441,
            -0.6843115,
            0.0112707634,
            -0.413891205,
            0.500854865,
            0.294130701,
            -0.064278109,
            1.56474824,
            -1.46062987,
            -0.191714203,
            0.37120045,
            -0.318270575,
            0.421495631,
            -0.111197296,
            -0.0505471965,
            -1.11660199,
        ],
        [
            1.84038692,
            -0.0240334481,
            -1.50468154,
            -0.397175988,
            -0.194224898,
            2.16336856,
            -0.459224696,
            -1.12707423,
            -0.132785192,
            -0.972288207,
            -0.448266462,
            1.65385072,
            1.08493435,
            -0.139539442,
            -0.736564019,
            -0.970914235,
        ],
        [
            -1.00144461,
            -0.264648601,
            0.15180972,
            -1.35534296,
            -0.570449865,
            0.548920772,
            2.19397263,
            -0.96974758,
            0.118845321,
            1.00720645,
            -0.906935667,
            0.0771276846,
            1.19258195,
            -0.288400212,
            -0.379963156,
            0.47788692,
        ],
        [
            0.2403683,
            -1.49789628,
            -1.31562899,
            -0.114276022,
            1.73051413,
            0.907514712,
            -1.1625876,
            -0.588002615,
            -1.39329879,
            -1.00274854,
            0.433808064,
            0.306385445,
            0.0423938863,
            -0.324835075,
            -1.17065113,
            -0.423362053,
        ],
        [
            2.09678042,
            0.320716032,
            0.503007711,
            -0.956178592,
            1.31203453,
            0.147550342,
            -0.391150607,
            -0.820526807,
            -0.532343648,
            -1.55939072,
            0.229388644,
            1.50006008,
            2.3493147,
            0.408329828,
            -0.054055204,
            0.827525105,
        ],
        [
            1.01079641,
            -0.760790007,
            -1.66155908,
            0.528174879,
            0.865158196,
            1.29078814,
            -0.449321153,
            -0.440363269,
            -0.218970931,
            -1.99758873,
            -0.283609132,
            0.704896111,
            1.02453134,
            -0.29252034,
            -0.681776056,
            -1.18008938,
        ],
        [
            0.0151235258,
            0.733608128,
            -1.01325133,
            -0.0410923926,
            1.38867375,
            -2.01223779,
            -0.457121521,
            0.711186365,
            -0.469538196,
            -0.272901969,
            1.10935803,
            1.50995076,
            0.981715254,
            -0.744119549,
            -1.39883413,
            -0.0820874695,
        ],
        [
            1.29299546,
            0.0808323603,
            -1.4712913,
            -0.216634835,
            0.2094869,
            1.16435315,
            0.202785404,
            -1.62795326,
            -0.257399185,
            -0.749226373,
            -1.01168814,
            0.963238248,
            0.909274205,
            -0.73765393,
            -1.05497989,
            -1.20721959,
        ],
    ]
)
TRANSFORMERS_PHI3_STEP_LOGITS = np.array(
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
            0.144309203,
            -0.130106655,
            -0.633968897,
            -0.379108902,
            1.97829129,
            1.2414064,
            -1.01744981,
            1.28496422,
            -0.693318825,
            -0.6737592,
            0.426003216,
            0.140683373,
            -0.17495204,
            0.170094076,
            -0.850562164,
            0.371957692,
        ],
        [
            -0.260866751,
            -0.669187392,
            -0.00289189388,
            -0.389648436,
            0.497923478,
            0.25081536,
            -0.0624965464,
            1.58358143,
            -1.45882643,
            -0.16739562,
            0.380263634,
            -0.296750891,
            0.387371647,
            -0.110838519,
            -0.0857631292,
            -1.08395779,
        ],
        [
            1.79102843,
            0.00743400241,
            -1.49996787,
            -0.288021757,
            -0.0387384617,
            2.10749161,
            -0.56182431,
            -0.984882159,
            -0.148579512,
            -1.02644264,
            -0.381766689,
            1.68483035,
            0.935791414,
            -0.0973964078,
            -0.587536758,
            -0.806315019,
        ],
        [
            -1.24845919,
            -0.24355829,
            0.187969056,
            -1.33949994,
            -0.577728013,
            0.297030571,
            2.12368386,
            -0.845087767,
            0.00963302261,
            0.954563962,
            -0.931149679,
            -0.0300605585,
            0.898041428,
            -0.216254868,
            -0.290758663,
            0.763488365,
        ],
        [
            0.45192247,
            -1.3855363,
            -1.39429688,
            -0.126125657,
            1.80037182,
            0.686889519,
            -1.2499484,
            -0.342715197,
            -1.58572049,
            -0.868235763,
            0.452856133,
            0.423896501,
            0.0269446378,
            -0.312011507,
            -1.29599791,
            -0.567422012,
        ],
        [
            2.03263156,
            0.155598493,
            0.547643017,
            -0.714377225,
            1.41961531,
            -0.0224702238,
            -0.401476655,
            -0.909267396,
            -0.203031524,
            -1.58446777,
            0.317949491,
            1.3758253,
            2.32356821,
            0.483628332,
            0.0385877521,
            0.675746588,
        ],
        [
            0.922064711,
            -0.883233306,
            -1.61099459,
            0.27408447,
            0.501741246,
            1.34411967,
            -0.266098103,
            -0.171458573,
            -0.405593444,
            -2.00089083,
            -0.241935098,
            0.935723721,
            1.03080862,
            -0.459641124,
            -0.800349371,
            -1.19555942,
        ],
        [
            0.362541749,
            0.450704454,
            -0.877160569,
            -0.148218542,
            1.94846226,
            -1.53409369,
            -0.716987312,
            0.665146083,
            -0.368473441,
            -0.264253369,
            0.782211886,
            1.21510505,
            1.00201564,
            -0.971578439,
            -1.1821958,
            -0.159045214,
        ],
        [
            0.877921346,
            -0.460102467,
            -1.61085773,
            -0.037298612,
            -0.143371127,
            1.46603043,
            0.00194460626,
            -0.677488598,
            -0.448340771,
            -1.75107071,
            -0.543817491,
            1.11071821,
            0.887042235,
            -0.601561267,
            -0.941811797,
            -1.10092493,
        ],
    ]
)

CONFIGS = {
    "llama": (LLAMA, TRANSFORMERS_LLAMA_LOGITS),
    "gemma3": (GEMMA3, TRANSFORMERS_GEMMA3_LOGITS),
    "phi3-longrope": (PHI3, TRANSFORMERS_PHI3_LOGITS),
}
# float32 against float64 logits of about unit size: transformers' own float32 model is 8.8e-7
# (Llama) and 8.7e-6 (Gemma 3) off its float64 one.
LOGIT_BOUND = 1e-5
SLOTS = 16


@pytest.fixture(scope="module")
def port():
    return page_port()


@pytest.mark.parametrize("family", CONFIGS)
def test_port_gives_transformers_logits(family, port):
    config, expected = CONFIGS[family]
    model = Port(config, weights(config), port)
    logits, _ = model(TOKENS, model.empty_cache(SLOTS), 0)
    assert np.abs(logits.numpy()[0] - expected).max() <= LOGIT_BOUND


# Printed by transformers 5.25.0 (torch 2.13.0): `print_transformers.py ports`, the same configs and
# weights in float64 with eager attention, `model.generate(TOKENS[:, :6], max_new_tokens=8,
# do_sample=False)`. (Gemma 3's tiny random model repeats one token; Llama's and Phi-3's do not.)
TRANSFORMERS_GREEDY = {
    "llama": [4, 15, 12, 2, 4, 15, 5, 5],
    "gemma3": [2, 2, 2, 2, 2, 2, 2, 2],
    "phi3-longrope": [4, 15, 5, 11, 12, 2, 4, 5],
}


@pytest.mark.parametrize("family", CONFIGS)
def test_the_pages_greedy_generation_is_transformers(family, port):
    config, _ = CONFIGS[family]
    model = Port(config, weights(config), port)
    assert port["generate"](model, TOKENS[:, :6], steps=8, slots=SLOTS) == TRANSFORMERS_GREEDY[family]


def test_gemma3_port_depends_on_its_sliding_window(port):
    # Without the window the sliding layers see every earlier token: the logits move far past
    # the bound, so the test above checks the window.
    model = Port(GEMMA3, weights(GEMMA3), port)
    for attention in model.attention:
        attention.sliding_window = None
    logits, _ = model(TOKENS, model.empty_cache(SLOTS), 0)
    assert np.abs(logits.numpy()[0] - TRANSFORMERS_GEMMA3_LOGITS).max() > 100 * LOGIT_BOUND


def decode(model, tokens, mode="eager", prompt=6):
    """Logits of `tokens` from a prompt of `prompt` tokens, then one token a step with the cache."""
    step = model if mode == "eager" else tf.function(model)
    logits, cache = step(tokens[:, :prompt], model.empty_cache(SLOTS), tf.constant(0))
    pieces = [logits.numpy()[0]]
    for index in range(prompt, tokens.shape[1]):
        logits, cache = step(tokens[:, index : index + 1], cache, tf.constant(index))
        pieces.append(logits.numpy()[0])
    return np.concatenate(pieces)


@pytest.mark.slow
@pytest.mark.parametrize("family", CONFIGS)
@pytest.mark.parametrize("mode", ["eager", "graph"])
def test_prompt_then_single_token_steps_give_transformers_cached_logits(family, mode, port):
    config, full_pass = CONFIGS[family]
    # transformers' cached steps equal its full pass (to 1e-14) except across LongRoPE's switch.
    expected = TRANSFORMERS_PHI3_STEP_LOGITS if family == "phi3-longrope" else full_pass
    model = Port(config, weights(config), port)
    steps = decode(model, TOKENS, mode)  # Gemma 3's steps 6 .. 9 pass its window of 4
    assert np.abs(steps - expected).max() <= LOGIT_BOUND
    if family == "phi3-longrope":  # the switch at position 8 matters: the full pass differs
        assert np.abs(steps - full_pass).max() > 0.1


# Keras 3.15's `dot_product_attention` on TensorFlow repeats key/value heads only when there are
# two or more (a single one fails in its einsum): grouped-query attention here.
GROUPED = {"num_attention_heads": 4, "num_key_value_heads": 2, "head_dim": 8}

# Tiny configs of every family `hf_attention_layers` reads (its windows, chunks, layers without
# rotation, per-type ropes and temperature), in the port's Llama (or Gemma) body: what the
# positions decide, not each family's own layers.
# One configuration for each rule (the others decide like one of these).
FAMILIES = {
    name: {**TINY, "rms_norm_eps": 1e-6, "tie_word_embeddings": False, **PLAN_CONFIGS[name], **GROUPED}
    for name in (
        "mistral", "qwen2-on", "qwen2_moe-on", "gemma2", "gemma3", "gpt_oss", "cohere2", "llama4",
        "llama4-listed", "smollm3-on", "phi3",
    )
}  # fmt: skip
for name in ("llama4", "llama4-listed"):
    FAMILIES[name]["attention_chunk_size"] = 4  # chunk edges at positions 4 and 8


@pytest.mark.slow
@pytest.mark.parametrize("name", FAMILIES)
def test_every_family_decodes_step_by_step_as_its_full_pass(name, port):
    config = FAMILIES[name]
    model = Port(config, weights(config, seed=len(name)), port)
    full, _ = model(TOKENS, model.empty_cache(SLOTS), 0)
    steps = decode(model, TOKENS, prompt=3)
    assert np.abs(steps - full.numpy()[0]).max() <= LOGIT_BOUND


@pytest.mark.parametrize("family", CONFIGS)
def test_each_steps_rows_are_a_full_pass_rows_bit_for_bit(family, port):
    # A step at `index` covers what a full pass of `index + 1` tokens covers last (the same
    # extent: LongRoPE's factors are chosen by it): the rows each attention layer rotates with.
    config, _ = CONFIGS[family]
    model = Port(config, weights(config), port)
    heads = ops.zeros((1, 1, 1, config["head_dim"]))
    for attention in model.attention:
        rope = attention.rope
        for index in range(TOKENS.shape[1]):
            step = rope.rows(heads, start_index=tf.constant(index))
            full = rope.rows(ops.zeros((1, index + 1, 1, config["head_dim"])))
            for got, expected in zip(step, full, strict=True):
                np.testing.assert_array_equal(got.numpy()[0, 0], expected.numpy()[0, index])
