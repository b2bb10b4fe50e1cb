"""A plugin cell that breaks the cell contract outside its own code -- its declared ``state_size``
differs from the state its ``call`` returns -- is a one-paragraph error naming the cell, where it
came from and what seqkit expects, with a non-zero exit and no run directory; never an internal
error."""

from __future__ import annotations

import yaml
from click.testing import CliRunner

from seqkit.cli import main
from tests.conftest import make_recipe

BROKEN = '''
import keras
import seqkit


@keras.saving.register_keras_serializable(package="broken_cells")
class HalfStateCell(keras.layers.Layer):
    """Declares a state of units // 2 but returns its whole output [B, units] as the new state."""

    def __init__(self, units, **kwargs):
        super().__init__(**kwargs)
        self.units = units
        self.state_size = [units // 2]
        self.output_size = units

    def build(self, input_shape):
        self.kernel = self.add_weight(shape=(input_shape[-1], self.units), name="kernel")

    def call(self, inputs, states, training=False):
        h = keras.ops.tanh(keras.ops.matmul(inputs, self.kernel))  # the state is never read
        return h, [h]

    def get_config(self):
        return {**super().get_config(), "units": self.units}


@seqkit.register_cell("half_state")
class HalfState(seqkit.CellPlugin):
    state_names = ("h",)

    def make_cell(self, name=None):
        return HalfStateCell(self.spec.units, name=name)
'''


def test_a_cell_whose_state_size_differs_from_its_state_is_named(tmp_path, keras):
    (tmp_path / "broken_cells.py").write_text(BROKEN, encoding="utf-8")
    (tmp_path / "r.yaml").write_text(yaml.safe_dump(make_recipe(
        data={"limit": 40}, training={"epochs": 1}, model={"cell": "half_state", "units": 8,
                                                           "embedding_dim": 4})))
    run = tmp_path / "run"
    res = CliRunner().invoke(main, ["train", str(tmp_path / "r.yaml"), "--run-dir", str(run),
                                    "--plugin", str(tmp_path / "broken_cells.py")])
    assert res.exit_code == 2, res.output
    assert "internal error" not in res.output and "Traceback" not in res.output
    assert "half_state" in res.output and "broken_cells.py" in res.output and "state" in res.output
    assert not run.exists()
