"""Internal: a transformers module record (what `load_hf_attention_weights` loads) as JSON, so
that an attention layer's `get_config` keeps it and a reloaded layer takes the same weights."""

from tf_posenc import _hf_attention, _hf_conformer, _hf_deberta, _hf_decomposed, _hf_latent, _hf_plain

# Every record type a layer may carry, by the name its JSON gives.
_RECORDS = {
    record.__name__: record
    for record in (
        _hf_attention.Module,
        _hf_attention.Norm,
        _hf_deberta.DebertaAttention,
        _hf_conformer.ConformerAttention,
        _hf_decomposed.DecomposedAttention,
        _hf_plain.PlainAttention,
        _hf_latent.LatentAttention,
        _hf_latent.Indexer,
    )
}


def to_json(value):
    """Records, tuples and frozensets tagged (JSON has lists only); dicts, lists and scalars as
    they are."""
    if type(value).__name__ in _RECORDS and isinstance(value, tuple):
        return {"record": type(value).__name__, "fields": {k: to_json(v) for k, v in value._asdict().items()}}
    if isinstance(value, frozenset):
        return {"frozenset": sorted(to_json(item) for item in value)}
    if isinstance(value, tuple):
        return {"tuple": [to_json(item) for item in value]}
    if isinstance(value, list):
        return [to_json(item) for item in value]
    if isinstance(value, dict):
        return {key: to_json(item) for key, item in value.items()}
    return value


def from_json(value):
    """The record `to_json` gave, equal to the original."""
    if isinstance(value, list):
        return [from_json(item) for item in value]
    if not isinstance(value, dict):
        return value
    if set(value) == {"record", "fields"} and value["record"] in _RECORDS:
        return _RECORDS[value["record"]](**{k: from_json(v) for k, v in value["fields"].items()})
    if set(value) == {"frozenset"}:
        return frozenset(from_json(item) for item in value["frozenset"])
    if set(value) == {"tuple"}:
        return tuple(from_json(item) for item in value["tuple"])
    return {key: from_json(item) for key, item in value.items()}
