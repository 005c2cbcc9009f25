"""`hf_attention_layers`: the plan of `tf_posenc.attention` with this family's
`RotaryEmbedding`, in the layers package, which sits above the plan."""

from tf_posenc import attention
from tf_posenc.layers.rotary_embedding import RotaryEmbedding


def hf_attention_layers(config, **kwargs):
    """The position side of every decoder layer of a Hugging Face transformers model.

    Decides per layer what transformers 5.25's modules decide, from the config alone (a
    `config.json` as a dict, its path, the checkpoint folder holding it, or a transformers
    config object), for every model type of transformers 5.25 whose language model rotates its
    queries and keys (docs/porting.md lists them, and the ones refused with the mechanism they need):

    * the layer types: `layer_types`, or where the config omits it the default its model's
      config class derives (Gemma 2 alternates; Gemma 3 takes `sliding_window_pattern`,
      default 6; Cohere2 4; Qwen2 slides the layers from `max_window_layers` on when
      `use_sliding_window` is set; Llama 4 chunks its rotating layers; SmolLM3 slides its
      layers without rotation when `use_sliding_window` is set);
    * the rotation: one `RotaryEmbedding` per rope of the config (Gemma 3's full and sliding
      layers differ), `None` where the layer does not rotate (the full layers of Cohere2,
      AFMoE, EXAONE 4 and others that rotate on sliding layers only, Llama 4's and SmolLM3's
      `no_rope_layers` entries of 0, Granite's `layer_rope_theta` entries of 0, a config that
      turns positions off), in the layout the model's code uses;
    * the window (`sliding_window` on the sliding layers; Mistral, Mixtral, Phi-3: on every
      layer; Qwen2, Qwen3, their MoE models and SmolLM3: none unless `use_sliding_window`),
      the chunk (`attention_chunk_size`) on Llama 4's chunked layers, its temperature
      (`attn_temperature_tuning`, `floor_scale`, `attn_scale`) on its layers without rotation,
      and Ministral 3's and Mistral 4's on every layer;
    * the layers no position reaches: a hybrid model's linear-attention, state-space,
      recurrent and convolution blocks, and Mllama's cross-attention, as entries with
      `self_attention=False`.

    Args:
        config: The model's config, as `RotaryEmbedding.from_hf_config` takes it.
        **kwargs: Constructor arguments for every `RotaryEmbedding` (`dtype`,
            `sequence_axis`, ...).

    Returns:
        A list with one `AttentionLayer` per decoder layer: `rope`, `sliding_window`,
        `chunk_size`, `temperature`, `causal`, `scaling`, `kv_shared_layer_index` and
        `self_attention`.

    Example:

        >>> config = {"model_type": "gemma3_text", "num_hidden_layers": 3, "head_dim": 16,
        ...           "sliding_window": 512, "layer_types": ["sliding_attention"] * 2 + ["full_attention"],
        ...           "rope_parameters": {
        ...               "sliding_attention": {"rope_type": "default", "rope_theta": 10000.0},
        ...               "full_attention": {"rope_type": "linear", "factor": 8.0, "rope_theta": 1e6}}}
        >>> plan = hf_attention_layers(config)
        >>> [(layer.rope.max_wavelength, layer.sliding_window) for layer in plan]
        [(10000.0, 512), (10000.0, 512), (1000000.0, None)]
        >>> plan[0].rope is plan[1].rope
        True
    """
    return attention.attention_layers_with(RotaryEmbedding, config, **kwargs)
