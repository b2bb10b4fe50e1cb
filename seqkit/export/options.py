"""What ``seqkit export`` / :meth:`seqkit.Run.export` / :func:`seqkit.export.writer.export_run` are
asked to write: one typed object (:class:`ExportOptions`), checked before any run is loaded, that
the generic writer passes to the head's :meth:`~seqkit.heads.base.Head.export`."""

from __future__ import annotations

import dataclasses

from seqkit.errors import SeqkitError
from seqkit.export.tflite import check_modes

FORMATS = ("tflite", "saved_model", "all")
STATES = ("explicit", "internal")
DEFAULT_TOLERANCE = {"none": 1e-4, "float16": None, "dynamic-range": None, "int8": None, "int16x8": None}
DEFAULT_AGREEMENT = {"none": 0.999, "float16": 0.99, "dynamic-range": 0.99, "int8": 0.95, "int16x8": 0.98}


@dataclasses.dataclass
class ExportOptions:
    """The options of one export (the CLI's ``seqkit export`` flags, by the same names).

    Attributes:
        fmt: ``"tflite"`` (step model), ``"saved_model"`` or ``"all"``.
        quantize: TFLite precision: ``"none"``, ``"float16"``, ``"dynamic-range"``, ``"int8"``,
            ``"int16x8"``.
        tolerance: largest allowed max |logit difference| (None: :data:`DEFAULT_TOLERANCE`).
        min_agreement: smallest allowed arg-max agreement, in [0, 1] (None: :data:`DEFAULT_AGREEMENT`).
        parity_examples: held-out examples the parity check streams (>= 1).
        overwrite: replace an earlier export at ``out``.
        full_sequence, batch, length: a whole-sequence TFLite model for a pinned ``[batch,
            length]`` input (``length`` also pins an encoder-decoder's encoder). ``None`` (the
            default): whole-sequence where the run has no step model but its head exports whole
            sequences (a bidirectional acceptor or tagger), the step model otherwise
            (:func:`seqkit.export.writer.resolve_full_sequence`).
        state: ``"explicit"`` or ``"internal"`` (state kept inside the TFLite step model).
        io_type: ``"float"`` or ``"int"`` inputs/outputs of a full-integer model.
        calibration_examples: training records a full-integer model calibrates on (>= 1).
        cell_scaling: int8 step models carry LSTM cell states divided by a per-unit scale.
        int16_cell: int8 explicit-state step models of LSTM runs: int8 products, int16
            element-wise cell ops, by ai-edge-quantizer (:mod:`seqkit.export.int16_cell`).
        calibration, parity: JSON Lines files of records to calibrate on / check parity on,
            instead of the run's data or its ``export_sample.json`` (:mod:`seqkit.export.sample`).
    """

    fmt: str = "tflite"
    quantize: str = "none"
    tolerance: float | None = None
    min_agreement: float | None = None
    parity_examples: int = 32
    overwrite: bool = False
    full_sequence: bool | None = None
    batch: int = 1
    length: int | None = None
    state: str = "explicit"
    io_type: str = "float"
    calibration_examples: int = 128
    cell_scaling: bool = True
    int16_cell: bool = False
    calibration: str | None = None
    parity: str | None = None

    def check(self) -> "ExportOptions":
        """Refuse contradictory or out-of-range options (what needs no run); return ``self`` with
        the default tolerance and agreement of ``quantize`` filled in.

        Raises:
            SeqkitError: naming the flag and the fix.
        """
        if self.fmt not in FORMATS:
            raise SeqkitError(f"--format {self.fmt}: expected one of {', '.join(FORMATS)}.")
        if self.state not in STATES:
            raise SeqkitError(f"--state {self.state}: expected one of {', '.join(STATES)}.")
        if self.batch < 1 or (self.length is not None and self.length < 1):
            raise SeqkitError(f"--batch {self.batch} --length {self.length}: the pinned shape needs "
                              f"positive sizes.")
        if self.fmt == "saved_model" and self.quantize != "none":
            raise SeqkitError(f"--quantize {self.quantize} applies to the TFLite model; a SavedModel "
                              f"keeps float32 weights. Use --format tflite or --format all with --quantize.")
        check_modes(self.quantize, self.io_type)
        if self.int16_cell and (self.quantize != "int8" or self.io_type != "float" or self.full_sequence
                                or self.state != "explicit" or not self.cell_scaling):
            raise SeqkitError(f"--int16-cell: it quantizes an explicit-state int8 step model with "
                              f"float inputs and outputs and cell scaling (--quantize int8, the "
                              f"defaults otherwise); this export asks --quantize {self.quantize}"
                              f"{' --io-type int' if self.io_type != 'float' else ''}"
                              f"{' --full-sequence' if self.full_sequence else ''}"
                              f"{' --state ' + self.state if self.state != 'explicit' else ''}"
                              f"{' --no-cell-scaling' if not self.cell_scaling else ''}. Drop "
                              f"--int16-cell or those options.")
        if self.int16_cell:
            from seqkit.export.int16_cell import quantizer_version

            quantizer_version()  # before anything loads
        if self.calibration_examples < 1:
            raise SeqkitError(f"--calibration-examples {self.calibration_examples}: at least 1 needed.")
        if self.parity_examples < 1:
            raise SeqkitError(f"--parity-examples {self.parity_examples}: at least 1 needed.")
        from seqkit import arguments as a

        # NaN would pass every comparison of the parity gate: a finite tolerance, an agreement in [0, 1]
        a.real("tolerance", self.tolerance, 0, optional=True)
        a.real("min_agreement", self.min_agreement, 0, 1, optional=True)
        if self.tolerance is None:
            self.tolerance = DEFAULT_TOLERANCE[self.quantize]
        if self.min_agreement is None:
            self.min_agreement = DEFAULT_AGREEMENT[self.quantize]
        return self
