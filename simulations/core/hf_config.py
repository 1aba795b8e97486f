"""Turn a Hugging Face ``config.json`` into the fields of a :class:`ModelSpec`.

Supported families (by ``model_type``):

* LLaMA-style decoders with a gated (SwiGLU) FFN: ``llama`` (LLaMA 1/2, Llama 3.x),
  ``mistral``, ``qwen2``, ``internlm`` and ``internlm2`` — keys ``hidden_size``,
  ``num_hidden_layers``, ``num_attention_heads``, ``num_key_value_heads`` (absent = MHA),
  ``intermediate_size``, ``vocab_size``, ``max_position_embeddings``, optional
  ``head_dim`` and ``tie_word_embeddings`` (default false, as in ``LlamaConfig``).
* GPT-style decoders with a plain FFN: ``gpt2`` (``n_embd``, ``n_layer``, ``n_head``,
  ``n_inner`` — absent means 4 × ``n_embd`` —, ``n_positions``; embeddings always tied),
  ``gptj`` (same keys, untied), ``gpt_neox`` (LLaMA-style key names, untied by default)
  and ``opt`` (``ffn_dim``; tied by default).

The result is a plain dict (spec field → value, plus ``sources`` naming the config key each
number came from) so callers can add a slug and name and build the spec; nothing here
touches a database. Missing or invalid keys raise SpecError naming ``config.<key>``.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from simulations.core.errors import SpecError
from simulations.core.spec import FfnKind, ModelSpec

_LLAMA_LIKE = ("llama", "mistral", "qwen2", "internlm", "internlm2")
_GPT2_LIKE = ("gpt2", "gptj")
SUPPORTED_MODEL_TYPES = (*_LLAMA_LIKE, *_GPT2_LIKE, "gpt_neox", "opt")
#: ``torch_dtype`` (``dtype`` in newer transformers) values: torch dtype names as
#: transformers writes them, with or without the ``torch.`` prefix, and ``auto``. The value
#: does not change the model's shapes, but a name outside these is a broken config.
TORCH_DTYPES = (
    "auto",
    "float16",
    "half",
    "bfloat16",
    "float32",
    "float",
    "float64",
    "double",
    "float8_e4m3fn",
    "float8_e4m3fnuz",
    "float8_e5m2",
    "float8_e5m2fnuz",
    "int8",
    "uint8",
    "int16",
    "int32",
    "int64",
)


def _int(config: Mapping[str, Any], key: str) -> int:
    value = config.get(key)
    if value is None:
        raise SpecError(f"config.{key}", "is required for this model type")
    if isinstance(value, bool) or not isinstance(value, int):
        raise SpecError(f"config.{key}", f"must be an integer, got {value!r}")
    if value < 1:
        raise SpecError(f"config.{key}", "must be positive")
    return value


def _optional_int(config: Mapping[str, Any], key: str) -> int | None:
    return None if config.get(key) is None else _int(config, key)


def _bool(config: Mapping[str, Any], key: str, default: bool) -> bool:
    value = config.get(key, default)
    if not isinstance(value, bool):
        raise SpecError(f"config.{key}", f"must be true or false, got {value!r}")
    return value


def _check_dtype(config: Mapping[str, Any]) -> None:
    for key in ("torch_dtype", "dtype"):
        value = config.get(key)
        if value is None:
            continue
        name = value.removeprefix("torch.") if isinstance(value, str) else value
        if name not in TORCH_DTYPES:
            raise SpecError(
                f"config.{key}",
                f"unknown dtype {value!r} (expected one of: {', '.join(TORCH_DTYPES)})",
            )


def model_fields_from_hf_config(
    config: Mapping[str, Any], *, origin: str = "Hugging Face config.json"
) -> dict[str, Any]:
    """ModelSpec fields (without ``slug`` and ``name``) read from ``config``.

    ``origin`` names the file in the ``sources`` texts (e.g. ``"meta-llama/Llama-2-7b-hf
    config.json"``). Raises SpecError for an unsupported ``model_type`` or a bad key.
    """
    if not isinstance(config, Mapping):
        raise SpecError("config", "must be a JSON object")
    model_type = config.get("model_type")
    if model_type not in SUPPORTED_MODEL_TYPES:
        raise SpecError(
            "config.model_type",
            f"unsupported model type {model_type!r} "
            f"(supported: {', '.join(SUPPORTED_MODEL_TYPES)})",
        )
    _check_dtype(config)
    keys: dict[str, str] = {}

    def take(field: str, key: str, value: Any) -> Any:
        keys[field] = key
        return value

    if model_type in _GPT2_LIKE:
        hidden = take("hidden_size", "n_embd", _int(config, "n_embd"))
        n_heads = take("n_heads", "n_head", _int(config, "n_head"))
        fields: dict[str, Any] = {
            "n_layers": take("n_layers", "n_layer", _int(config, "n_layer")),
            "hidden_size": hidden,
            "n_heads": n_heads,
            "n_kv_heads": take("n_kv_heads", "n_head", n_heads),
            "vocab_size": take("vocab_size", "vocab_size", _int(config, "vocab_size")),
            "max_context": take("max_context", "n_positions", _int(config, "n_positions")),
            "ffn_kind": FfnKind.PLAIN,
        }
        inner = _optional_int(config, "n_inner")
        fields["ffn_size"] = take(
            "ffn_size", "n_inner" if inner else "n_embd (4 × n_embd, n_inner absent)", inner
        ) or (4 * hidden)
        # GPT-2 always ties the LM head to the input embedding; GPT-J never does.
        fields["tied_embeddings"] = take(
            "tied_embeddings",
            "model_type (GPT-2 ties its LM head)" if model_type == "gpt2" else "model_type",
            model_type == "gpt2",
        )
    else:
        hidden = take("hidden_size", "hidden_size", _int(config, "hidden_size"))
        n_heads = take("n_heads", "num_attention_heads", _int(config, "num_attention_heads"))
        kv = _optional_int(config, "num_key_value_heads")
        ffn_key = "ffn_dim" if model_type == "opt" else "intermediate_size"
        fields = {
            "n_layers": take("n_layers", "num_hidden_layers", _int(config, "num_hidden_layers")),
            "hidden_size": hidden,
            "n_heads": n_heads,
            "n_kv_heads": take(
                "n_kv_heads",
                "num_key_value_heads" if kv else "num_attention_heads (MHA)",
                kv or n_heads,
            ),
            "ffn_size": take("ffn_size", ffn_key, _int(config, ffn_key)),
            "vocab_size": take("vocab_size", "vocab_size", _int(config, "vocab_size")),
            "max_context": take(
                "max_context",
                "max_position_embeddings",
                _int(config, "max_position_embeddings"),
            ),
            "ffn_kind": FfnKind.GATED if model_type in _LLAMA_LIKE else FfnKind.PLAIN,
            "tied_embeddings": take(
                "tied_embeddings",
                "tie_word_embeddings",
                _bool(config, "tie_word_embeddings", model_type == "opt"),
            ),
        }
    head_dim = _optional_int(config, "head_dim")
    if head_dim is None:
        if hidden % n_heads:
            raise SpecError("config.num_attention_heads", "must divide the hidden size")
        head_dim = hidden // n_heads
        keys["head_dim"] = f"{keys['hidden_size']} / {keys['n_heads']}"
    else:
        keys["head_dim"] = "head_dim"
    fields["head_dim"] = head_dim
    keys["ffn_kind"] = f"model_type {model_type!r}"
    fields["sources"] = {field: f"{origin}: {key}" for field, key in sorted(keys.items())}
    return fields


def model_spec_from_hf_config(
    config: Mapping[str, Any], *, slug: str, name: str, origin: str = "Hugging Face config.json"
) -> ModelSpec:
    """A validated ModelSpec from ``config`` (SpecError on a bad config or shape)."""
    return ModelSpec(slug=slug, name=name, **model_fields_from_hf_config(config, origin=origin))
