"""Units people read: a metric's unit from its name and its value as tables and reports print it
(times in ms, in s from 10 s on, three significant digits; rates with their unit). The files keep
the exact numbers."""

from .format import SECONDS_FROM, UNITS, display, sig3, unit_of

__all__ = ["SECONDS_FROM", "UNITS", "display", "sig3", "unit_of"]
