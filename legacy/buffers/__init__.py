"""Moved to `lmgym.buffers` in 0.3.0; this name warns and goes in the next release."""
from lmgym.moved import replace_with_new

replace_with_new(__name__)
