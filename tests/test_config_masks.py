import pytest
import torch
import torch.nn.functional as F

from model_core.config import ModelConfig
from model_core.masks import pad_mask, subsequent_mask, target_mask


def test_config_json_round_trip():
    cfg = ModelConfig(
        src_vocab_size=100,
        tgt_vocab_size=120,
        share_embeddings=False,
        norm="post",
        activation="swish",
        position_layout="halves",
        output_bias=True,
    )
    assert ModelConfig.from_json(cfg.to_json()) == cfg


@pytest.mark.parametrize(
    "bad, message",
    [
        ({"d_model": 30, "n_heads": 4}, "divisible"),
        ({"norm": "sandwich"}, "norm"),
        ({"activation": "tanh"}, "activation"),
        ({"position_layout": "learned"}, "position_layout"),
        ({"tgt_vocab_size": 99}, "share_embeddings"),
        ({"eos_id": 0}, "distinct"),
    ],
)
def test_config_rejects_invalid_values(bad, message):
    with pytest.raises(ValueError, match=message):
        ModelConfig(**{"src_vocab_size": 100, "tgt_vocab_size": 100, **bad})


def test_config_rejects_unknown_keys():
    data = ModelConfig(src_vocab_size=10, tgt_vocab_size=10).to_dict() | {"n_layers": 6}
    with pytest.raises(ValueError, match="unknown model config key.*n_layers"):
        ModelConfig.from_dict(data)


def test_pad_mask_marks_real_tokens():
    tokens = torch.tensor([[5, 6, 3, 0], [7, 3, 0, 0]])
    m = pad_mask(tokens, pad_id=0)
    assert m.shape == (2, 1, 1, 4)
    assert m[:, 0, 0].tolist() == [[True, True, True, False], [True, True, False, False]]


def test_subsequent_mask_is_lower_triangular_and_cached():
    m = subsequent_mask(4, "cpu")
    assert m.shape == (1, 1, 4, 4)
    assert m[0, 0].tolist() == [[i >= j for j in range(4)] for i in range(4)]
    # Slices of one cached tensor, not rebuilt per call.
    assert subsequent_mask(7, "cpu").data_ptr() == m.data_ptr()


def test_target_mask_combines_pad_and_future():
    tokens = torch.tensor([[2, 5, 0]])
    m = target_mask(tokens, 0)[0, 0]
    assert m.tolist() == [[True, False, False], [True, True, False], [True, True, False]]


@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16])
def test_boolean_masks_are_exact_in_half_precision(dtype):
    """Masked keys get zero weight in half precision (a -1e9 fill would overflow float16)."""
    torch.manual_seed(0)
    q, k, v = (torch.randn(2, 2, 5, 8) for _ in range(3))
    tokens = torch.tensor([[4, 4, 4, 0, 0], [4, 4, 4, 4, 4]])
    mask = pad_mask(tokens, 0)
    full = F.scaled_dot_product_attention(q, k, v, attn_mask=mask)
    half = F.scaled_dot_product_attention(q.to(dtype), k.to(dtype), v.to(dtype), attn_mask=mask)
    assert torch.isfinite(half).all()
    torch.testing.assert_close(half.float(), full, atol=3e-2, rtol=3e-2)
    # Changing the masked values must not change the output.
    v2 = v.clone()
    v2[0, :, 3:] = 1e4
    half2 = F.scaled_dot_product_attention(q.to(dtype), k.to(dtype), v2.to(dtype), attn_mask=mask)
    assert torch.equal(half2[0], half[0])
