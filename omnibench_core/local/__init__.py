"""The embedded ``local`` target: a CPU server that speaks sglang-omni's HTTP API.

Speech out comes from hibari-tts (a 24 kHz ONNX voice shipped in its wheel), speech in from
pocketsphinx's en-us model (shipped in its wheel). Nothing is downloaded at run time. Its
numbers measure the pipeline and the harness, not MiniCPM-o.

    python -m omnibench_core.local serve --model-name minicpmo --port 8000
"""
