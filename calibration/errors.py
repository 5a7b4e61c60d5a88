"""Exceptions of the calibration package.

Every error names the thing and the place: the recording file and the sample
index for bad logs, the servo id for the bench experiment.
"""

__all__ = [
    "CalibrationError",
    "RecordingError",
    "RecordingFormatError",
    "RecordingGapError",
    "RecordingNaNError",
    "RecordingTimeError",
    "RecordingTooShortError",
    "RecordingUnexcitedError",
    "FitError",
    "ExperimentError",
]


class CalibrationError(Exception):
    """Base class of every calibration error."""


class RecordingError(CalibrationError):
    """A recording cannot be used; the message names the file and sample."""

    def __init__(self, path, message, index=None):
        self.path = str(path)
        self.index = index
        where = self.path if index is None else f"{self.path}, sample {index}"
        super().__init__(f"{where}: {message}")


class RecordingFormatError(RecordingError):
    """Missing key, wrong type or unknown format."""


class RecordingGapError(RecordingError):
    """A time step larger than 3x the median sampling period."""


class RecordingNaNError(RecordingError):
    """A NaN or infinite value in a recorded channel."""


class RecordingTimeError(RecordingError):
    """Time that does not increase strictly."""


class RecordingTooShortError(RecordingError):
    """Too few samples or too short a duration to identify anything."""


class RecordingUnexcitedError(RecordingError):
    """The motion does not excite the dynamics (load too light, no steps)."""


class FitError(CalibrationError):
    """The identification failed or its inputs are inconsistent."""


class ExperimentError(CalibrationError):
    """The bench experiment could not run or was interrupted."""
