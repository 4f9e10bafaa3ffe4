"""A tiny MobileNet-style Keras model (trained for one epoch in a few seconds) for sweep tests."""

from __future__ import annotations

import numpy as np
import pytest


def build_tiny(input_shape=(32, 32, 1), relu6: bool = True):
    import keras
    from keras import layers
    inputs = keras.Input(shape=input_shape, batch_size=1, name="image")
    x = layers.Conv2D(8, 3, strides=2, padding="same", use_bias=False, name="stem")(inputs)
    x = layers.BatchNormalization(name="stem_bn")(x)
    x = layers.ReLU(6.0 if relu6 else None, name="stem_act")(x)
    x = layers.DepthwiseConv2D(3, strides=2, padding="same", use_bias=False, name="dw")(x)
    x = layers.BatchNormalization(name="dw_bn")(x)
    x = layers.ReLU(name="dw_act")(x)
    x = layers.Conv2D(16, 1, name="pw")(x)
    x = layers.ReLU(name="pw_act")(x)
    x = layers.GlobalAveragePooling2D(name="gap")(x)
    outputs = layers.Dense(10, name="logits")(x)
    return keras.Model(inputs, outputs, name="tiny")


@pytest.fixture(scope="session")
def tiny_model(tmp_path_factory, digits):
    """A tiny trained model saved as .keras (two epochs on 300 daylight samples)."""
    import keras
    keras.utils.set_random_seed(0)
    train = digits.select(split="train", condition="daylight")
    model = build_tiny()
    config = model.get_config()
    for layer in config["layers"]:
        if layer["class_name"] == "InputLayer":
            layer["config"]["batch_shape"] = [None, 32, 32, 1]
    batched = keras.Model.from_config(config)
    batched.compile(optimizer=keras.optimizers.Adam(1e-2),
                    loss=keras.losses.SparseCategoricalCrossentropy(from_logits=True))
    batched.fit(train.x[:300], train.y[:300], batch_size=32, epochs=2, verbose=0)
    model.set_weights(batched.get_weights())
    path = tmp_path_factory.mktemp("tiny") / "tiny.keras"
    model.save(path)
    return str(path)


@pytest.fixture()
def calib_x(digits):
    return np.asarray(digits.select(split="calibration").x[:64], np.float32)
