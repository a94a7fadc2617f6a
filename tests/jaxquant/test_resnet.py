"""ResNet-20 / ResNet-20*: parameter counts, shapes and which layers are quantized."""

import dataclasses

import chex
import jax
import jax.numpy as jnp
import pytest

from jaxquant import RESNET20, RESNET20_STAR, ModelConfig, QuantConfig, ResNet, count_params, latent_kernels


def abstract_variables(config, image_shape=(32, 32, 3)):
    images = jnp.zeros((2,) + image_shape, jnp.float32)
    return jax.eval_shape(lambda: ResNet(config).init(jax.random.key(0), images, delta=0.1, train=False))


def hand_count(blocks, width, classes=10, channels=3):
    """3x3 convs without bias, BatchNorm (scale, bias), 1x1 projection + BN where the shape changes."""
    total = 9 * channels * width + 2 * width  # stem
    previous = width
    for stage_width in (width, 2 * width, 4 * width):
        for block in range(blocks):
            inputs = previous if block == 0 else stage_width
            total += 9 * inputs * stage_width + 9 * stage_width * stage_width + 4 * stage_width
            if inputs != stage_width:
                total += inputs * stage_width + 2 * stage_width
            previous = stage_width
    return total + 4 * width * classes + classes


@pytest.mark.parametrize(
    "config, expected",
    [(RESNET20, 272_474), (ModelConfig(blocks_per_stage=2), 175_258), (RESNET20_STAR, 4_337_370),
     (ModelConfig(blocks_per_stage=3, inflation=5), 6_758_810)],
)
def test_parameter_counts(config, expected):
    count = count_params(abstract_variables(config)["params"])
    assert count == expected == hand_count(config.blocks_per_stage, config.base_width * config.inflation)


def test_resnet20_star_is_two_blocks_at_inflation_five():
    star = RESNET20_STAR
    assert (star.blocks_per_stage, star.inflation, star.stage_widths) == (2, 5, (80, 160, 320))


def test_forward_shapes_and_batch_stats():
    config = ModelConfig(blocks_per_stage=1, base_width=4)
    model = ResNet(config)
    images = jnp.ones((3, 8, 8, 1), jnp.float32)
    shapes = abstract_variables(config, (8, 8, 1))
    variables = jax.tree.map(lambda leaf: jnp.full(leaf.shape, 0.5, leaf.dtype), shapes)
    logits, updates = model.apply(variables, images, delta=0.1, train=True, mutable=["batch_stats"])
    chex.assert_shape(logits, (3, 10))
    chex.assert_trees_all_equal_shapes(updates["batch_stats"], variables["batch_stats"])


@pytest.mark.parametrize("first, last", [(False, False), (True, False), (False, True), (True, True)])
def test_which_layers_are_quantized(first, last):
    quant = QuantConfig("ternary", quantize_first=first, quantize_last=last)
    params = abstract_variables(ModelConfig(blocks_per_stage=1, quant=quant))["params"]
    layers = {name.rsplit("/", 1)[0] for name in latent_kernels(params)}
    blocks = {f"stage{s}_block1/{conv}" for s in (1, 2, 3) for conv in ("conv1", "conv2")}
    shortcuts = {"stage2_block1/shortcut", "stage3_block1/shortcut"}
    assert layers == blocks | shortcuts | ({"stem"} if first else set()) | ({"classifier"} if last else set())
    assert ("kernel" in params["stem"]) != first and ("kernel" in params["classifier"]) != last


def test_full_precision_model_has_no_latent_kernels():
    config = dataclasses.replace(RESNET20, quant=QuantConfig("fp"))
    assert latent_kernels(abstract_variables(config)["params"]) == {}


def test_invalid_model_config():
    with pytest.raises(ValueError, match="blocks_per_stage"):
        ModelConfig(blocks_per_stage=0)
