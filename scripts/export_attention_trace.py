#!/usr/bin/python3
"""Export a .katt attention trace (pre-softmax logits) for the `trace` attention source (scripts/kellevp/export_attention_trace.py, run as a command)."""
import os
import sys

sys.dont_write_bytecode = True
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from kellevp.export_attention_trace import main  # noqa: E402

sys.exit(main())
