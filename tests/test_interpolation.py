"""Learned position tables resized to any grid: ViT's, DINOv2's and SigLIP's bicubic interpolation."""

import keras
import numpy as np
import pytest
import tensorflow as tf

import tf_posenc
from tf_posenc import LearnedPatchPositionEmbedding, interpolate_position_embeddings

# Printed by transformers 5.24.0 (torch 2.14.1): `ViTEmbeddings`, `Dinov2Embeddings`,
# `Dinov2WithRegistersEmbeddings` (antialias) and `SiglipVisionEmbeddings` with `TABLE` as their
# position embeddings (SigLIP: its grid rows), `interpolate_pos_encoding(zeros, 2 * height,
# 2 * width)` at patch size 2, rounded here to 9 digits. ViT's, DINOv2's and SigLIP's grids came
# out bit for bit the same (all float32), so one of them is kept.
TABLE = np.array(
    [
        [
            [0.1257302165031433, -0.13210485875606537, 0.6404226422309875],
            [0.10490011423826218, -0.5356693863868713, 0.3615950644016266],
            [1.3040000200271606, 0.9470809698104858, -0.7037352323532104],
            [-1.2654215097427368, -0.6232744455337524, 0.04132597893476486],
            [-2.32503080368042, -0.218791663646698, -1.2459110021591187],
            [-0.7322673797607422, -0.5442590117454529, -0.3163001537322998],
            [0.4116305410861969, 1.042513370513916, -0.12853465974330902],
            [1.3664634227752686, -0.6651946902275085, 0.35151007771492004],
            [0.9034701585769653, 0.0940122976899147, -0.7434992790222168],
            [-0.9217253923416138, -0.4577258229255676, 0.22019512951374054],
            [-1.0096181631088257, -0.20917557179927826, -0.15922501683235168],
            [0.5408455729484558, 0.21465912461280823, 0.35537269711494446],
            [-0.6538286209106445, -0.12961363792419434, 0.7839754819869995],
            [1.4934310913085938, -1.2590655088424683, 1.5139237642288208],
            [1.3458753824234009, 0.7813113927841187, 0.2644556164741516],
            [-0.31392282247543335, 1.4580206871032715, 1.9602583646774292],
            [1.8016349077224731, 1.3151037693023682, 0.3573804199695587],
        ]
    ],
    "float32",
)
TRANSFORMERS_RESIZED = {
    ((6, 5), False): np.array(
        [
            [
                [0.125730217, -0.132104859, 0.640422642],
                [0.104434527, -0.624452472, 0.491767228],
                [1.362583756, 0.699446201, -0.510769784],
                [0.160847947, 0.262708545, -0.357462496],
                [-2.120970726, -0.687192917, -0.264715135],
                [-2.672800779, -0.223243102, -1.368736625],
                [-0.37410599, -0.64893508, -0.004223241],
                [0.727150857, 0.851676464, -0.372849703],
                [0.745085478, 0.284110129, -0.019692823],
                [-0.160502642, -0.738257766, -0.108942531],
                [-0.606865525, 0.000206995, -1.218944073],
                [-0.932582855, -0.602061033, -0.334596157],
                [-0.334045321, 0.627342165, -0.203276932],
                [0.93438369, 0.214705169, 0.229253277],
                [1.485783815, -0.545241296, 0.169797808],
                [0.882739365, 0.102148056, -0.523341894],
                [-1.124374628, -0.418161184, 0.031321194],
                [-1.250566125, -0.204213619, -0.169982061],
                [0.013664564, -0.021682052, -0.035706747],
                [0.596914291, -0.064982571, 0.373969436],
                [-0.670449555, -0.229479432, 0.634176731],
                [0.282258421, -0.912187934, 0.970063865],
                [0.09982127, -0.198279023, 0.169598147],
                [-0.02312541, 0.671841443, 0.564271748],
                [0.145514235, 0.904699266, 1.156423688],
                [0.451710999, 0.550697088, 0.686887503],
                [1.712358713, -1.462028623, 1.706720233],
                [1.806673765, 0.177603468, 0.472640067],
                [0.341520697, 1.434248209, 1.242986441],
                [0.06857302, 1.607981324, 1.801435113],
                [2.160758734, 1.432892799, 0.21226202],
            ]
        ]
    ),
    ((3, 2), False): np.array(
        [
            [
                [0.125730217, -0.132104859, 0.640422642],
                [0.788756251, 0.374590069, -0.249057606],
                [-1.548438907, -0.559829354, -0.491046697],
                [-1.044317245, 0.016654026, -0.21519649],
                [0.915536463, -0.298451543, 0.203610703],
                [1.174776316, -0.326072544, 0.627195477],
                [0.496863812, 1.262872338, 1.230703831],
            ]
        ]
    ),
    ((9, 9), False): np.array(
        [
            [
                [0.125730217, -0.132104859, 0.640422642],
                [0.064918026, -0.694634318, 0.56582427],
                [0.42008388, -0.296552092, 0.249387458],
                [1.269821763, 0.553333998, -0.399146616],
                [1.318620205, 0.922321081, -0.774066627],
                [0.143169418, 0.262637407, -0.36931482],
                [-1.377398968, -0.560825825, 0.019640606],
                [-2.295446634, -0.650666952, -0.399532467],
                [-2.56574297, -0.332305938, -1.099331856],
                [-2.798055172, -0.213017851, -1.442658305],
                [-0.143725708, -0.703678012, 0.350143999],
                [0.198071972, -0.291877419, 0.117055297],
                [0.970966637, 0.588351607, -0.368632048],
                [1.156731606, 0.96657449, -0.61937356],
                [0.367417514, 0.267067492, -0.22895664],
                [-0.743947685, -0.587456405, 0.100651398],
                [-1.460408926, -0.643512845, -0.320445955],
                [-1.732689619, -0.266370684, -1.003480911],
                [-1.939105153, -0.118447803, -1.340082169],
                [-0.538257122, -0.734481335, -0.096022435],
                [-0.203180149, -0.274632126, -0.161809295],
                [0.461025685, 0.712473333, -0.320899189],
                [0.932235599, 1.121420026, -0.321316659],
                [0.863371432, 0.287669688, 0.050882053],
                [0.512100756, -0.686424494, 0.258345574],
                [0.192148119, -0.67065084, -0.203577191],
                [-0.060160525, -0.139012694, -0.897293866],
                [-0.205811694, 0.081935979, -1.243502259],
                [-0.895197392, -0.705069661, -0.343738884],
                [-0.640269518, -0.291613162, -0.298585892],
                [-0.219666079, 0.591347337, -0.239928469],
                [0.401529908, 0.973055243, -0.078760572],
                [1.017425299, 0.254469812, 0.240248933],
                [1.40101254, -0.583295882, 0.377349138],
                [1.371396303, -0.535471857, 0.028898424],
                [1.038073421, -0.039295588, -0.502807021],
                [0.897553384, 0.171285897, -0.767310143],
                [-1.189323902, -0.509197354, -0.244108677],
                [-1.088772178, -0.305899978, -0.224358827],
                [-1.007216096, 0.12135835, -0.207854301],
                [-0.498773605, 0.330713093, -0.109687231],
                [0.489616394, 0.043895822, 0.072564274],
                [1.239242554, -0.322563589, 0.221045673],
                [1.078787327, -0.33632645, 0.224605799],
                [0.385465801, -0.167536378, 0.131513864],
                [0.079580158, -0.099810109, 0.093778268],
                [-1.001552582, -0.457941622, 0.181794599],
                [-1.038222313, -0.402748972, 0.093098894],
                [-1.204677582, -0.316265374, -0.103397094],
                [-0.962610364, -0.1671478, -0.16462633],
                [-0.09363164, 0.020400241, -0.00904343],
                [0.58978337, 0.127434373, 0.258701384],
                [0.311994135, 0.050992295, 0.511693418],
                [-0.456684113, -0.123821534, 0.679204285],
                [-0.809230804, -0.205684111, 0.781436622],
                [-0.008455728, -0.833672225, 0.848131478],
                [-0.077215865, -0.651027322, 0.637732625],
                [-0.232236996, -0.346720129, 0.180354789],
                [-0.27055493, 0.08925131, 0.010658997],
                [-0.094891109, 0.511300266, 0.421467781],
                [0.112434015, 0.760790527, 0.921080947],
                [0.162815094, 0.713338673, 1.00017035],
                [0.110546604, 0.457629085, 0.83099556],
                [0.095682114, 0.346534938, 0.771764219],
                [1.160950541, -1.333809257, 1.460841775],
                [1.141142845, -0.901726782, 1.14824152],
                [1.17287755, -0.117561094, 0.462997675],
                [0.92144531, 0.712992132, 0.23078689],
                [0.221141919, 1.139041305, 0.980658174],
                [-0.214249268, 1.276059985, 1.708244443],
                [0.276468784, 1.29689312, 1.413601875],
                [1.167940974, 1.143046975, 0.656034708],
                [1.599081635, 1.083125472, 0.305499315],
                [1.77262032, -1.589027166, 1.800561666],
                [1.768646002, -1.03759408, 1.429950118],
                [1.878503919, -0.027449433, 0.616726875],
                [1.502534866, 1.003189921, 0.34460479],
                [0.351018578, 1.461926818, 1.267541528],
                [-0.410969108, 1.571607947, 2.119423628],
                [0.304324299, 1.624366283, 1.648240924],
                [1.678345323, 1.501694918, 0.604418159],
                [2.337448359, 1.458945751, 0.112852901],
            ]
        ]
    ),
    ((2, 7), False): np.array(
        [
            [
                [0.125730217, -0.132104859, 0.640422642],
                [-0.423611581, -0.712797999, 0.010609739],
                [0.195688695, 0.130718648, -0.196514204],
                [0.957291484, 1.102092624, -0.419340104],
                [0.745085359, 0.28410995, -0.019692749],
                [0.048418805, -0.772451639, 0.147877082],
                [-0.381829351, -0.388020724, -0.64589572],
                [-0.633511424, 0.026567914, -1.270256877],
                [0.291229039, -0.951385617, 1.003438234],
                [0.18855609, -0.549194098, 0.553553998],
                [0.048175387, 0.075770013, 0.048178609],
                [-0.023125425, 0.671841562, 0.564271927],
                [0.058533892, 0.933618486, 1.183957696],
                [0.294459313, 0.736163318, 0.933437049],
                [0.466784, 0.537347436, 0.669796944],
            ]
        ]
    ),
    ((6, 5), True): np.array(
        [
            [
                [0.125730217, -0.132104859, 0.640422642],
                [0.107935607, -0.598965526, 0.455856413],
                [1.224757075, 0.637828112, -0.473776907],
                [0.10591796, 0.228565559, -0.350822002],
                [-1.946583152, -0.624796987, -0.289573073],
                [-2.584978819, -0.222878933, -1.33520937],
                [-0.331811696, -0.614483356, 0.030163841],
                [0.68548727, 0.739076078, -0.351177245],
                [0.61850816, 0.246311828, -0.069331847],
                [-0.252239794, -0.641604424, -0.129914269],
                [-0.745968461, -0.030902132, -1.154995084],
                [-0.874444842, -0.586116791, -0.314669818],
                [-0.207405418, 0.594079852, -0.192996383],
                [0.892215788, 0.202800795, 0.191193327],
                [1.363886595, -0.499372423, 0.137654498],
                [0.850424349, 0.096365482, -0.563570321],
                [-1.051109791, -0.435157269, 0.083559558],
                [-1.124433279, -0.211689264, -0.135549277],
                [-0.047862124, -0.006322816, 0.007909884],
                [0.479262888, -0.014388406, 0.399343252],
                [-0.626979709, -0.192157239, 0.646407962],
                [0.354047239, -0.925268531, 0.974460065],
                [0.215800554, -0.121005028, 0.227026418],
                [0.052611526, 0.671932578, 0.614499867],
                [0.176101252, 0.888416946, 1.130216241],
                [0.576790273, 0.608989775, 0.623870194],
                [1.658877611, -1.405171394, 1.655577779],
                [1.676675558, 0.191334829, 0.532696605],
                [0.410041243, 1.336143613, 1.205950141],
                [0.151395783, 1.552832603, 1.704842925],
                [2.064140558, 1.40454042, 0.254176617],
            ]
        ]
    ),
    ((3, 2), True): np.array(
        [
            [
                [0.125730217, -0.132104859, 0.640422642],
                [0.477885872, 0.151946217, -0.122765847],
                [-0.777044356, -0.227664649, -0.573747098],
                [-0.4980838, -0.07060191, -0.082498223],
                [0.54893285, -0.086768165, 0.153259471],
                [0.660187602, -0.162374541, 0.801235914],
                [0.487241238, 1.079464674, 0.943042994],
            ]
        ]
    ),
    ((2, 7), True): np.array(
        [
            [
                [0.125730217, -0.132104859, 0.640422642],
                [-0.538605988, -0.611395359, 0.02271118],
                [-0.111842744, -0.035592463, -0.151821896],
                [0.58261168, 0.842221797, -0.409705222],
                [0.493723065, 0.173483744, -0.094133288],
                [0.066031486, -0.642364144, 0.12265259],
                [-0.538260579, -0.328471333, -0.513911426],
                [-0.87039113, -0.082184158, -0.909717798],
                [0.171806753, -0.926747024, 0.798390329],
                [0.159788802, -0.488544285, 0.49729073],
                [0.150857314, 0.287484616, 0.057979271],
                [0.208616391, 0.614685953, 0.576934457],
                [0.338197172, 0.715024769, 1.106625319],
                [0.604582608, 0.621411324, 0.708466887],
                [0.753439903, 0.551457882, 0.431414634],
            ]
        ]
    ),
}


def cubic(x, a):
    x = np.abs(x)
    near = ((a + 2) * x - (a + 3)) * x * x + 1
    return np.where(x < 1, near, np.where(x < 2, ((a * x - 5 * a) * x + 8 * a) * x - 4 * a, 0))


def torch_bicubic_weights(source, target):
    """torch's bicubic (align_corners=False, a=-0.75) along one axis, restated in float64."""
    where = (np.arange(target) + 0.5) * source / target - 0.5
    first = np.floor(where)
    weights = np.zeros((target, source))
    for tap in range(4):
        index = np.clip(first.astype(int) + tap - 1, 0, source - 1)
        np.add.at(weights, (np.arange(target), index), cubic(where - first - (tap - 1), -0.75))
    return weights


def torch_antialias_weights(source, target):
    """torch's antialiased bicubic (PIL's filter, a=-0.5) along one axis, restated in float64."""
    scale = source / target
    support = 2 * max(scale, 1)
    weights = np.zeros((target, source))
    for row in range(target):
        center = (row + 0.5) * scale
        first, end = max(int(center - support + 0.5), 0), min(int(center + support + 0.5), source)
        columns = np.arange(first, end)
        values = cubic((columns - center + 0.5) / max(scale, 1), -0.5)
        weights[row, first:end] = values / values.sum()
    return weights


def float64_resized(table, grid, antialias=False, prefix=1):
    weights = torch_antialias_weights if antialias else torch_bicubic_weights
    side = int(round((table.shape[1] - prefix) ** 0.5))
    patches = table[0, prefix:].astype("float64").reshape(side, side, -1)
    resized = np.einsum("Hh,hwd,Ww->HWd", weights(side, grid[0]), patches, weights(side, grid[1]))
    return np.concatenate([table[0, :prefix], resized.reshape(-1, table.shape[-1])])[None]


@pytest.mark.parametrize("grid, antialias", TRANSFORMERS_RESIZED, ids=lambda value: str(value))
def test_tables_are_resized_as_transformers_resizes_them(grid, antialias):
    expected = TRANSFORMERS_RESIZED[grid, antialias]
    for convention in ("vit", "dinov2"):
        got = interpolate_position_embeddings(TABLE, grid, convention=convention, antialias=antialias).numpy()
        assert got.shape == expected.shape
        # torch and tf_posenc both use float32 weights and sums: a few float32 units apart, and
        # each within as much of the float64 restatement (a unit is 2**-22 at these magnitudes).
        assert np.abs(got - expected).max() <= 2.5e-6
        assert np.abs(got - float64_resized(TABLE, grid, antialias)).max() <= 2.5e-6
    siglip = interpolate_position_embeddings(TABLE[0, 1:], grid, num_prefix_tokens=0, convention="siglip")
    assert np.abs(siglip.numpy() - expected[0, 1:]).max() <= 2.5e-6 or antialias


def test_the_same_grid_is_the_table_and_keras_bicubic_is_another_filter():
    np.testing.assert_array_equal(interpolate_position_embeddings(TABLE, (4, 4)).numpy(), TABLE)
    grid = TABLE[:, 1:].reshape(1, 4, 4, 3)
    keras_resize = keras.ops.image.resize(grid, (9, 9), interpolation="bicubic")  # a = -0.5
    ours = interpolate_position_embeddings(TABLE, (9, 9)).numpy()[0, 1:].reshape(9, 9, 3)
    assert np.abs(keras.ops.convert_to_numpy(keras_resize)[0] - ours).max() > 0.01


def test_a_grid_known_only_when_the_graph_runs_and_xla():
    specs = [tf.TensorSpec((), tf.int32)] * 2
    for jit_compile in (False, True):
        resize = tf.function(
            lambda h, w: interpolate_position_embeddings(TABLE, (h, w)),
            input_signature=specs,
            jit_compile=jit_compile,
        )
        for grid in ((6, 5), (2, 7), (9, 9)):
            eager = interpolate_position_embeddings(TABLE, grid).numpy()
            if jit_compile:  # XLA reassociates and fuses the float32 arithmetic: its noise
                assert np.abs(resize(*grid).numpy() - eager).max() <= 4e-6
            else:
                np.testing.assert_array_equal(resize(*grid).numpy(), eager)
        assert resize.experimental_get_tracing_count() == 1


def test_the_layer_adds_its_resized_table():
    layer = LearnedPatchPositionEmbedding(grid_size=4, d_model=3)
    layer.build()
    layer.set_weights([TABLE])
    tokens = np.random.default_rng(0).normal(size=(2, 31, 3)).astype("float32")
    expected = tokens + interpolate_position_embeddings(TABLE, (6, 5)).numpy()
    np.testing.assert_array_equal(layer(tokens, grid=(6, 5)).numpy(), expected)
    square = np.zeros((1, 1 + 81, 3), "float32")
    np.testing.assert_array_equal(
        layer(square).numpy(), interpolate_position_embeddings(TABLE, (9, 9)).numpy()
    )
    signature = [tf.TensorSpec((None, None, 3)), *[tf.TensorSpec((), tf.int32)] * 2]
    graph = tf.function(lambda x, h, w: layer(x, grid=(h, w)), input_signature=signature)
    np.testing.assert_array_equal(graph(tokens, 6, 5).numpy(), expected)


def grid_model():
    """Patches `(batch, height, width, 3)` of any image size in, the resized grid table added."""
    patches = keras.Input((None, None, 3))
    embedding = LearnedPatchPositionEmbedding(4, 3, embeddings_initializer="glorot_uniform")
    model = keras.Model(patches, embedding(patches))
    embedding.set_weights([TABLE])
    return model


def test_a_patch_grid_of_any_size_gets_the_tables_grid_rows():
    model = grid_model()
    for height, width in ((6, 5), (9, 9), (2, 7)):
        patches = np.random.default_rng(height).normal(size=(2, height, width, 3)).astype("float32")
        rows = interpolate_position_embeddings(TABLE, (height, width)).numpy()[:, 1:]
        expected = patches + rows.reshape(1, height, width, 3)
        np.testing.assert_array_equal(model.predict(patches, verbose=0), expected)
        np.testing.assert_array_equal(model(patches).numpy(), expected)


@pytest.mark.parametrize(
    "call, message",
    [
        (lambda: interpolate_position_embeddings(TABLE, (0, 4)), r"`target_grid` must be a positive integer"),
        (lambda: interpolate_position_embeddings(TABLE, (4,)), r"`target_grid` must be \(height, width\)"),
        (lambda: interpolate_position_embeddings(TABLE, (4, 4), num_prefix_tokens=20), r"square grid"),
        (lambda: interpolate_position_embeddings(TABLE[:, :16], (4, 4)), r"square grid of patches"),
        (lambda: interpolate_position_embeddings(TABLE, (4, 4), convention="siglip"), r"has no class token"),
        (lambda: interpolate_position_embeddings(TABLE, (4, 4), convention="clip"), r"`convention` must be"),
        (lambda: LearnedPatchPositionEmbedding(4, 3)(np.zeros((1, 30, 3), "float32")), r"`grid` must be"),
        (lambda: LearnedPatchPositionEmbedding(4, 3)(np.zeros((1, 30, 3), "float32"), grid=(6, 5)),
         r"`grid` must have the inputs' patches"),
        (lambda: LearnedPatchPositionEmbedding(4, 3)(np.zeros((1, 17, 4), "float32")), r"must have shape"),
        (lambda: LearnedPatchPositionEmbedding(0, 3), r"`grid_size` must be a positive integer"),
        (lambda: LearnedPatchPositionEmbedding(4, 3)(keras.Input((None, 3)), grid=(None, None)),
         r"`grid` must be \(height, width\).*Received: grid=\(None, None\)"),
        (lambda: LearnedPatchPositionEmbedding(4, 3)(np.zeros((1, 6, 5, 3), "float32"), grid=(6, 5)),
         r"`grid` is read from \(batch, height, width, d_model\) inputs"),
        (lambda: LearnedPatchPositionEmbedding(4, 3)(np.zeros((1, 6, 5, 4), "float32")),
         r"or \(batch, height"),
    ],
    ids=["zero-side", "one-side", "prefix-beyond", "not-square", "siglip-prefix", "convention", "no-grid",
         "grid-mismatch", "width", "grid-size", "none-grid", "grid-with-patches", "patch-width"],
)  # fmt: skip
def test_bad_interpolation_arguments_are_clear_errors(call, message):
    with pytest.raises(ValueError, match=message):
        call()


class ResizedEmbedding(keras.Model):
    """Patch tokens and their grid in, the resized table added: a model of `None` grids."""

    def __init__(self, **kwargs):
        super().__init__(**kwargs)
        self.embedding = LearnedPatchPositionEmbedding(4, 3, embeddings_initializer="glorot_uniform")

    def call(self, inputs):
        tokens, height, width = inputs
        return self.embedding(tokens, grid=(height[0], width[0]))


@pytest.mark.slow
def test_resized_tables_serve_from_saved_model_litert_onnx_tf_keras(tmp_path):
    import onnxruntime
    import tf2onnx
    import tf_keras
    from ai_edge_litert.interpreter import Interpreter
    from helpers import serve_without_tf_posenc

    from tf_posenc import tf_keras as keras_2

    model = ResizedEmbedding()
    tokens = np.random.default_rng(1).normal(size=(2, 31, 3)).astype("float32")
    h, w = np.array([6], "int32"), np.array([5], "int32")
    expected = model([tokens, h, w]).numpy()
    specs = [tf.TensorSpec((None, None, 3)), tf.TensorSpec((1,), tf.int32), tf.TensorSpec((1,), tf.int32)]
    model.export(str(tmp_path / "exported"), verbose=False, input_signature=[specs])
    served = serve_without_tf_posenc(tmp_path, {"grid": [tokens, h, w]})["grid"]
    np.testing.assert_allclose(served, expected, rtol=1e-6, atol=1e-6)

    converter = tf.lite.TFLiteConverter.from_saved_model(str(tmp_path / "exported"))
    converter.target_spec.supported_ops = [tf.lite.OpsSet.TFLITE_BUILTINS]
    interpreter = Interpreter(model_content=converter.convert())
    # The inputs in the signature's order: tokens, height, width.
    details = sorted(interpreter.get_input_details(), key=lambda detail: detail["name"])
    by_name = dict(zip(("x", "h", "w"), details, strict=True))
    interpreter.resize_tensor_input(by_name["x"]["index"], tokens.shape)
    interpreter.allocate_tensors()
    for name, value in (("x", tokens), ("h", h), ("w", w)):
        interpreter.set_tensor(by_name[name]["index"], value)
    interpreter.invoke()
    litert = interpreter.get_tensor(interpreter.get_output_details()[0]["index"])
    np.testing.assert_allclose(litert, expected, rtol=1e-6, atol=1e-6)

    function = tf.function(lambda *inputs: model(list(inputs)), input_signature=specs)
    proto, _ = tf2onnx.convert.from_function(function, input_signature=specs, opset=17)
    session = onnxruntime.InferenceSession(proto.SerializeToString(), providers=["CPUExecutionProvider"])
    names = [given.name for given in session.get_inputs()]
    onnx = session.run(None, dict(zip(names, (tokens, h, w), strict=True)))[0]
    np.testing.assert_allclose(onnx, expected, rtol=1e-6, atol=1e-6)

    # Patch grids of any size: the functional model, exported, with the same numbers.
    grid = grid_model()
    patches = np.random.default_rng(2).normal(size=(2, 6, 5, 3)).astype("float32")
    expected = grid(patches).numpy()
    grid.export(str(tmp_path / "exported"), verbose=False)
    served = serve_without_tf_posenc(tmp_path, {"patches": [patches]})["patches"]
    np.testing.assert_allclose(served, expected, rtol=1e-6, atol=1e-6)
    converter = tf.lite.TFLiteConverter.from_saved_model(str(tmp_path / "exported"))
    converter.target_spec.supported_ops = [tf.lite.OpsSet.TFLITE_BUILTINS]
    interpreter = Interpreter(model_content=converter.convert())
    interpreter.resize_tensor_input(interpreter.get_input_details()[0]["index"], patches.shape)
    interpreter.allocate_tensors()
    interpreter.set_tensor(interpreter.get_input_details()[0]["index"], patches)
    interpreter.invoke()
    litert = interpreter.get_tensor(interpreter.get_output_details()[0]["index"])
    np.testing.assert_allclose(litert, expected, rtol=1e-6, atol=1e-6)
    spec = [tf.TensorSpec((None, None, None, 3))]
    proto, _ = tf2onnx.convert.from_function(
        tf.function(grid, input_signature=spec), input_signature=spec, opset=17
    )
    session = onnxruntime.InferenceSession(proto.SerializeToString(), providers=["CPUExecutionProvider"])
    onnx = session.run(None, {session.get_inputs()[0].name: patches})[0]
    np.testing.assert_allclose(onnx, expected, rtol=1e-6, atol=1e-6)

    old = keras_2.LearnedPatchPositionEmbedding(4, 3)
    old.build()
    old.set_weights(model.embedding.get_weights())
    assert isinstance(old, tf_keras.layers.Layer)
    np.testing.assert_array_equal(
        old(tokens, grid=(6, 5)).numpy(), model.embedding(tokens, grid=(6, 5)).numpy()
    )


def bert4keras_hierarchical(table, length, alpha):
    """bert4keras's `PositionEmbedding` with `hierarchical=alpha` (the method of
    keras-team/keras-hub#2190), restated in float64 NumPy: every position through the
    decomposition, the first `n` too."""
    table = table.astype(np.float64)
    n = table.shape[0]
    decomposed = (table - alpha * table[:1]) / (1 - alpha)
    positions = np.arange(length)
    return alpha * decomposed[positions // n] + (1 - alpha) * decomposed[positions % n]


@pytest.mark.parametrize("alpha", [0.4, 0.1, 0.9], ids=["alpha-0.4", "alpha-0.1", "alpha-0.9"])
def test_a_1d_table_extends_by_hierarchical_decomposition(alpha):
    table = np.random.RandomState(3).standard_normal((64, 16)).astype("float32")
    longer = tf_posenc.extend_position_embeddings(table, 64 * 64, alpha=alpha)
    assert longer.shape == (4096, 16) and longer.dtype == np.float32
    np.testing.assert_array_equal(longer[:64], table)  # the table's own rows, bit for bit
    expected = bert4keras_hierarchical(table, 4096, alpha)
    # The restatement recomputes the first rows too: equal to the table within rounding.
    np.testing.assert_allclose(expected[:64], table, atol=1e-6)
    # New rows: the float64 value rounded once.
    np.testing.assert_array_equal(longer[64:], expected[64:].astype(np.float32))
    # Within a block of 64 new positions the coarse row stays: neighbours differ as the table's
    # rows do (the point of the method).
    np.testing.assert_allclose(longer[64 * 5 + 7] - longer[64 * 5 + 6], table[7] - table[6], atol=1e-5)


def test_a_roberta_table_keeps_its_padding_rows_and_serves_hf_position_ids():
    # RoBERTa's table: rows 0 and 1 are padding (`pad_token_id=1`), positions start at row 2.
    table = np.random.RandomState(4).standard_normal((514, 8))
    longer = tf_posenc.extend_position_embeddings(table, 2 + 1024, num_prefix_rows=2)
    np.testing.assert_array_equal(longer[:514], table)
    np.testing.assert_allclose(longer[2:], bert4keras_hierarchical(table[2:], 1024, 0.4), atol=1e-12)
    ids = np.full((1, 1024), 5)
    rows = tf_posenc.hf_position_ids({"model_type": "roberta", "max_position_embeddings": 1026}, ids)
    assert int(np.asarray(rows).max()) == 1025  # within the extended table
    embedding = keras.layers.Embedding(len(longer), 8, weights=[longer], dtype="float64")
    np.testing.assert_array_equal(keras.ops.convert_to_numpy(embedding(rows))[0, :512], table[2:514])


@pytest.mark.parametrize(
    "arguments, message",
    [
        ({"length": 64 * 64 + 1}, "`length` must be between the table's 64 rows and 4096"),
        ({"length": 63}, "`length` must be between"),
        ({"length": 128, "alpha": 1.0}, "`alpha` must be below 1"),
        ({"length": 128, "alpha": 0.0}, "`alpha` must be a finite number greater than 0"),
        ({"length": 128, "num_prefix_rows": 63}, "at least 2 position rows"),
    ],
    ids=["too-long", "shorter", "alpha-1", "alpha-0", "all-prefix"],
)
def test_bad_extension_arguments_are_named(arguments, message):
    table = np.zeros((64, 4), "float32")
    with pytest.raises(ValueError, match=message):
        tf_posenc.extend_position_embeddings(table, **arguments)
