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

* Mixtures of experts: ``mixtral`` (LLaMA keys plus ``num_local_experts``,
  ``num_experts_per_tok``; the experts' width is ``intermediate_size``; a ``sliding_window``
  windows every layer), ``qwen3_moe`` (``num_experts``, ``num_experts_per_tok``,
  ``moe_intermediate_size``; every layer sparse: ``decoder_sparse_step`` 1 and no
  ``mlp_only_layers``), ``deepseek_v3`` / ``deepseek_v2`` (``n_routed_experts``,
  ``n_shared_experts``, ``moe_intermediate_size``, ``first_k_dense_replace``, ``moe_layer_freq``
  1, and multi-head latent attention: ``kv_lora_rank``, ``q_lora_rank`` — null for none —,
  ``qk_nope_head_dim``, ``qk_rope_head_dim``, ``v_head_dim``) and ``gpt_oss``
  (``num_local_experts``, ``num_experts_per_tok``, ``sliding_window`` on the layers
  ``layer_types`` names ``sliding_attention``, experts at 4.25 bits when
  ``quantization_config.quant_method`` is ``mxfp4``).

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
#: Mixture-of-experts families (LLaMA-style keys for the attention and sizes).
_MOE = ("mixtral", "qwen3_moe", "deepseek_v3", "deepseek_v2", "gpt_oss")
SUPPORTED_MODEL_TYPES = (*_LLAMA_LIKE, *_GPT2_LIKE, "gpt_neox", "opt", *_MOE)
#: Bits per parameter of an MXFP4 tensor: 4-bit E2M1 elements and one 8-bit E8M0 scale per
#: block of 32 (OCP Microscaling Formats v1.0, §5).
MXFP4_BITS = 4 + 8 / 32
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
        if model_type in ("deepseek_v3", "deepseek_v2"):
            kv = n_heads  # MLA: per-head keys from one latent; the config repeats the heads
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
            "ffn_kind": FfnKind.GATED if model_type in (*_LLAMA_LIKE, *_MOE) else FfnKind.PLAIN,
            "tied_embeddings": take(
                "tied_embeddings",
                "tie_word_embeddings",
                _bool(config, "tie_word_embeddings", model_type == "opt"),
            ),
        }
    if model_type in _MOE:
        _moe_fields(config, model_type, fields, keys)
    head_dim = _optional_int(config, "head_dim")
    if "mla" in fields:
        mla = fields["mla"]
        head_dim = mla["qk_nope_head_dim"] + mla["qk_rope_head_dim"]
        keys["head_dim"] = "qk_nope_head_dim + qk_rope_head_dim"
    elif head_dim is None:
        if hidden % n_heads:
            raise SpecError("config.num_attention_heads", "must divide the hidden size")
        head_dim = hidden // n_heads
        keys["head_dim"] = f"{keys['hidden_size']} / {keys['n_heads']}"
    elif "mla" not in fields:
        keys["head_dim"] = "head_dim"
    fields["head_dim"] = head_dim
    keys["ffn_kind"] = f"model_type {model_type!r}"
    fields["sources"] = {field: f"{origin}: {key}" for field, key in sorted(keys.items())}
    return fields


def _moe_fields(
    config: Mapping[str, Any], model_type: str, fields: dict[str, Any], keys: dict[str, str]
) -> None:
    """Add the ``moe`` (and ``mla``, ``sliding_window``) blocks of a mixture of experts."""
    n_layers = fields["n_layers"]
    moe: dict[str, Any] = {}

    def take(name: str, key: str, value: Any) -> Any:
        keys[name] = key
        return value

    if model_type in ("mixtral", "gpt_oss"):
        e_key = "num_local_experts"
        moe["expert_ffn_size"] = take(
            "moe.expert_ffn_size", "intermediate_size", fields["ffn_size"]
        )
    elif model_type == "qwen3_moe":
        e_key = "num_experts"
        moe["expert_ffn_size"] = take(
            "moe.expert_ffn_size", "moe_intermediate_size", _int(config, "moe_intermediate_size")
        )
        if config.get("decoder_sparse_step", 1) != 1:
            raise SpecError("config.decoder_sparse_step", "only 1 (every layer sparse) is modelled")
        if config.get("mlp_only_layers"):
            raise SpecError(
                "config.mlp_only_layers", "dense layers among MoE ones are not modelled"
            )
    else:
        e_key = "n_routed_experts"
        moe["expert_ffn_size"] = take(
            "moe.expert_ffn_size", "moe_intermediate_size", _int(config, "moe_intermediate_size")
        )
        if config.get("moe_layer_freq", 1) != 1:
            raise SpecError("config.moe_layer_freq", "only 1 (every layer after the dense ones)")
        shared = config.get("n_shared_experts")
        if shared is not None:
            moe["n_shared_experts"] = take(
                "moe.n_shared_experts", "n_shared_experts", _int(config, "n_shared_experts")
            )
        dense = config.get("first_k_dense_replace", 0)
        if isinstance(dense, bool) or not isinstance(dense, int) or not 0 <= dense < n_layers:
            raise SpecError(
                "config.first_k_dense_replace",
                f"must be an integer in [0, num_hidden_layers), got {dense!r}",
            )
        moe["first_dense_layers"] = take("moe.first_dense_layers", "first_k_dense_replace", dense)
        q_lora = config.get("q_lora_rank")
        fields["mla"] = {
            "kv_lora_rank": take("mla.kv_lora_rank", "kv_lora_rank", _int(config, "kv_lora_rank")),
            "qk_rope_head_dim": take(
                "mla.qk_rope_head_dim", "qk_rope_head_dim", _int(config, "qk_rope_head_dim")
            ),
            "qk_nope_head_dim": take(
                "mla.qk_nope_head_dim", "qk_nope_head_dim", _int(config, "qk_nope_head_dim")
            ),
            "v_head_dim": take("mla.v_head_dim", "v_head_dim", _int(config, "v_head_dim")),
            "q_lora_rank": take(
                "mla.q_lora_rank",
                "q_lora_rank",
                0 if q_lora is None else _int(config, "q_lora_rank"),
            ),
        }
    n_experts = take("moe.n_experts", e_key, _int(config, e_key))
    if n_experts < 2:
        raise SpecError(f"config.{e_key}", "a mixture of experts needs at least 2 experts")
    top_k = take(
        "moe.experts_per_token", "num_experts_per_tok", _int(config, "num_experts_per_tok")
    )
    if top_k > n_experts:
        raise SpecError(
            "config.num_experts_per_tok", f"must not exceed {e_key} ({top_k} > {n_experts})"
        )
    moe["n_experts"] = n_experts
    moe["experts_per_token"] = top_k
    if model_type == "gpt_oss":
        quant = config.get("quantization_config")
        if quant is not None and not isinstance(quant, Mapping):
            raise SpecError("config.quantization_config", "must be an object")
        if quant and quant.get("quant_method") == "mxfp4":
            moe["expert_weight_bits"] = take(
                "moe.expert_weight_bits", "quantization_config.quant_method mxfp4", MXFP4_BITS
            )
    fields["moe"] = moe
    window = config.get("sliding_window")
    if window is None or (model_type == "qwen3_moe" and not config.get("use_sliding_window")):
        return
    window = take("sliding_window.window_tokens", "sliding_window", _int(config, "sliding_window"))
    if model_type == "qwen3_moe":
        raise SpecError("config.use_sliding_window", "Qwen's windowed layers are not modelled")
    layers = n_layers
    if model_type == "gpt_oss":
        types = config.get("layer_types")
        if not isinstance(types, list) or len(types) != n_layers:
            raise SpecError("config.layer_types", "must list one attention type per layer")
        layers = sum(1 for t in types if t == "sliding_attention")
        keys["sliding_window.layers"] = "layer_types (sliding_attention)"
    else:
        keys["sliding_window.layers"] = "num_hidden_layers (every layer windowed)"
    if layers:
        fields["sliding_window"] = {"window_tokens": window, "layers": layers}


def model_spec_from_hf_config(
    config: Mapping[str, Any], *, slug: str, name: str, origin: str = "Hugging Face config.json"
) -> ModelSpec:
    """A validated ModelSpec from ``config`` (SpecError on a bad config or shape)."""
    return ModelSpec(slug=slug, name=name, **model_fields_from_hf_config(config, origin=origin))
